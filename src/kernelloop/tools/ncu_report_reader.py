"""Read Nsight Compute reports (.ncu-rep) through NVIDIA's own `ncu_report` module.

No GPU and no `ncu` binary are needed: `pip install ncu-report` (PyPI, 2025.3.1 and later) ships the
module together with the host library it loads. On a machine with Nsight Compute installed the same
module also lies beside `ncu` in `<ncu dir>/extras/python`; `load_ncu_report_module` uses that when
the pip package is missing.

The `ncu_report` calls relied on (all checked against ncu-report 2025.3.1 and 2026.3.1):
  load_report(path) -> IContext;  IContext.num_ranges(), .range_by_idx(i)
  IRange.num_actions(), .action_by_idx(i)
  IAction.name(IAction.NameBase_{FUNCTION,DEMANGLED,MANGLED}), .metric_names(), .metric_by_name(n),
          .rule_results()
  IMetric.kind(), .has_value(), .as_double(), .as_uint64(), .as_string(), .unit(),
          IMetric.ValueKind_{STRING,UINT32,UINT64,FLOAT,DOUBLE}
  IRuleResult.rule_identifier(), .name(), .section_identifier(), .has_rule_message(),
          .rule_message() -> {"title", "message", "type": MsgType_*},
          .has_speedup_estimation(), .speedup_estimation() -> {"type": SpeedupType_*, "speedup": pct}

Things the module does NOT do, which this reader makes up for:
  * A file that is not a report, is corrupt, truncated or of a file-format version the module cannot
    read does not raise: `load_report` returns a context with 0 ranges, or actions without name and
    metrics. Those cases become a `ReportError` here, with the versions in the message.
  * `IContext.get_version()` is the version of the ncu_report module, not of the Nsight Compute that
    wrote the report. That one is only in the report's process-info block ("Nsight Compute Target",
    "2025.3.1.0 (build …)"); `ncu_version` is found by a byte search for that string.
  * ncu_report 2025.x segfaults in a process that imported numpy first (seen on the H200 host); then
    the report is read by a helper interpreter instead (see "Reading in a child process").
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import mmap
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel

from ..config import internal_value
from ..errors import EnvironmentProblem, InputError, KernelloopError

__all__ = [
    "HEADLINE_METRICS",
    "KernelProfile",
    "Metric",
    "NcuUnavailable",
    "ReportError",
    "RuleResult",
    "headline",
    "list_kernels",
    "load_ncu_report_module",
    "read_report",
]


class NcuUnavailable(EnvironmentProblem):
    """NVIDIA's `ncu_report` Python module cannot be imported."""


class ReportError(InputError):
    """A report is missing, unreadable, corrupt, of an unreadable version, or lacks the kernel asked for."""


class Metric(BaseModel):
    name: str
    value: float | str
    unit: str  # as ncu_report gives it, in base units ("ns", "byte", "%", "hz", "byte/block", "" ...)


RuleKind = Literal["OPT", "INF", "WRN", "ERR", "OK", "other"]


class RuleResult(BaseModel):
    rule_id: str  # "CPIStall", "LaunchConfiguration", ...
    name: str  # "Warp Stall", ...
    section: str | None  # section identifier: "WarpStateStats", ...
    # What `ncu --page details` prints before the message. ncu prints MsgType.OK ("the message is
    # informative") as INF, so OK messages come out as "INF"; "OK" is never produced by the current
    # module. NONE (a rule without a message) is "other".
    kind: RuleKind
    message: str  # plain text: ncu's "@section:Id:text@"-style links are replaced by their text
    estimated_speedup_pct: float | None
    speedup_type: str | None  # "local" | "global" | None (no estimate, or UNKNOWN)
    title: str | None = None  # the message's title ("Lg Throttle Stalls"), when the rule gives one


class KernelProfile(BaseModel):
    kernel_name: str  # function name ("naive_matmul"): ncu's default --kernel-name-base
    demangled_name: str | None  # "naive_matmul(const float *, const float *, float *, int)"
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    device_name: str | None
    compute_capability: str | None  # "9.0"
    ncu_version: str | None  # Nsight Compute that wrote the report ("2025.3.1"), when recorded
    metrics: dict[str, Metric]  # every metric of the launch that has a (finite) value
    rules: list[RuleResult]
    mangled_name: str | None = None  # "_Z12naive_matmulPKfS0_Pfi"

    def value(self, name: str) -> float | None:
        """The metric's number, or None when absent or not numeric."""
        metric = self.metrics.get(name)
        if metric is None or isinstance(metric.value, str):
            return None
        return float(metric.value)


# ---------------------------------------------------------------------------------------------------
# Finding the module

_FIX = (
    "install NVIDIA's report reader with `pip install ncu-report` (>=2025.3.1), "
    "or put <Nsight Compute dir>/extras/python on PYTHONPATH"
)


def _extras_python_dirs() -> list[Path]:
    """The `extras/python` folders of the Nsight Compute installs every command finds, most specific
    first (one search: tools.toolkit)."""
    from .toolkit import nsight_compute_dirs

    found = [folder / "extras" / "python" for folder in nsight_compute_dirs()]
    return [path for path in found if (path / "ncu_report.py").is_file() or (path / "ncu_report").is_dir()]


@functools.lru_cache(maxsize=1)
def load_ncu_report_module() -> ModuleType:
    """Import `ncu_report`: the installed package first, else the one beside an Nsight Compute install.

    The result is cached (a failure is not, so installing the package and calling again works).
    """
    try:
        return importlib.import_module("ncu_report")
    except ImportError as exc:
        first_error = exc
    looked = _extras_python_dirs()
    for folder in looked:
        sys.path.insert(0, str(folder))
        sys.modules.pop("ncu_report", None)
        try:
            return importlib.import_module("ncu_report")
        except ImportError:
            sys.path.remove(str(folder))
            sys.modules.pop("ncu_report", None)
    where = ", ".join(str(p) for p in looked) if looked else "no extras/python beside an `ncu` on PATH or in /opt/nvidia, /usr/local/cuda*"
    reason = str(first_error).splitlines()[0] if str(first_error) else type(first_error).__name__
    raise NcuUnavailable(f"cannot import Nsight Compute's `ncu_report` module ({reason}; tried {where}): {_FIX}")


def _module_version(mod: ModuleType) -> str:
    """The ncu_report version: the pip distribution's, or the Nsight Compute folder's it was found in."""
    module_file = Path(str(getattr(mod, "__file__", "") or ""))
    site = module_file.parent.parent
    if module_file.parent.name == "ncu_report" and any(site.glob("ncu_report-*.dist-info")):
        try:
            from importlib.metadata import version

            return version("ncu-report")
        except Exception:
            pass
    match = re.search(r"(\d{4}\.\d+\.\d+)", str(module_file))
    return match.group(1) if match else "(version unknown)"


# ---------------------------------------------------------------------------------------------------
# Reading


_NVR_MAGIC = b"NVR\x00"
# The uint32 after the magic. 2 in reports of Nsight Compute 2025.3.1, read by ncu-report 2025.3.1 and
# 2026.3.1; both return an empty context when it is changed to anything else (checked with 1, 3, 99).
_KNOWN_FORMATS = frozenset({2})
_NCU_VERSION = re.compile(rb"Nsight Compute[^\x00]{0,48}?(\d{4}\.\d+\.\d+)(?:\.\d+)? \(build")
_LINK = re.compile(r"@(url|section|sass|source):([^@]*)@")


def _link_text(match: re.Match[str]) -> str:
    """The visible text of ncu's message links (see IRuleResult.rule_message's docstring):
    @url:<text>:<link>@, @section:<id>:<text>@, @sass:<address>:<text>@, @source:<file>:<line>:<text>@."""
    kind, body = match.group(1), match.group(2)
    if kind == "url":
        return body.split(":", 1)[0]
    if kind == "source":
        parts = body.split(":", 2)
        return parts[2] if len(parts) == 3 else body
    return body.split(":", 1)[1] if ":" in body else body


def _plain(message: str) -> str:
    return " ".join(_LINK.sub(_link_text, message).split())


def _report_ncu_version(path: Path) -> str | None:
    """The Nsight Compute version recorded in the report's process info, if found."""
    try:
        with path.open("rb") as fh:
            size = path.stat().st_size
            if size == 0:
                return None
            tail = 1 << 20
            if size > tail:  # the process-info blocks sit near the end: look there first
                fh.seek(size - tail)
                match = _NCU_VERSION.search(fh.read())
                if match:
                    return match.group(1).decode()
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                match = _NCU_VERSION.search(data)  # type: ignore[call-overload]
                return match.group(1).decode() if match else None
    except (OSError, ValueError):
        return None


def _header(path: Path) -> tuple[bytes, int | None]:
    try:
        with path.open("rb") as fh:
            head = fh.read(8)
    except OSError:
        return b"", None
    if len(head) == 8 and head[:4] == _NVR_MAGIC:
        return head[:4], int.from_bytes(head[4:8], "little")
    return head[:4], None


def _versions_note(mod: ModuleType, path: Path) -> str:
    written = _report_ncu_version(path)
    reader = f"ncu_report {_module_version(mod)}"
    return f"written by Nsight Compute {written}, read with {reader}" if written else f"read with {reader}"


def _unreadable(mod: ModuleType, path: Path) -> ReportError:
    """Explain a report from which `load_report` got nothing."""
    size = path.stat().st_size
    if size == 0:
        return ReportError(f"{path} is empty, not an Nsight Compute report")
    magic, fmt = _header(path)
    note = _versions_note(mod, path)
    if magic != _NVR_MAGIC:
        return ReportError(f"{path} is not an Nsight Compute report (no NVR header; {note})")
    if fmt in _KNOWN_FORMATS:
        return ReportError(
            f"{path} is truncated or corrupt, or too new for this reader (file format {fmt}; {note}); "
            "re-capture or re-export it, or `pip install -U ncu-report`"
        )
    return ReportError(
        f"{path} has report file format {fmt}, which this reader cannot read ({note}; it reads format "
        f"{', '.join(map(str, sorted(_KNOWN_FORMATS)))}); read it with a matching ncu-report "
        "(`pip install -U ncu-report`) or the extras/python of the Nsight Compute that wrote it"
    )


def _check_file(path: Path) -> None:
    if not path.exists():
        raise ReportError(f"report not found: {path}")
    if path.is_dir():
        raise ReportError(f"{path} is a directory, not an .ncu-rep report")
    try:
        path.open("rb").close()
    except OSError as exc:
        raise ReportError(f"cannot open {path}: {exc.strerror or exc}") from exc


def _load(mod: ModuleType, path: Path) -> Any:
    try:
        context = mod.load_report(str(path))
    except FileNotFoundError as exc:  # the file exists, so this is the module's own host library
        raise NcuUnavailable(f"ncu_report cannot find its Nsight Compute host library ({_one_line(exc)}): {_FIX}") from exc
    except Exception as exc:
        raise ReportError(f"cannot read {path}: {_one_line(exc)} ({_versions_note(mod, path)})") from exc
    if context is None or context.num_ranges() == 0:
        raise _unreadable(mod, path)
    return context


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or "no reason given"


def _actions(mod: ModuleType, context: Any, path: Path, keep: list[Any] | None = None) -> list[Any]:
    """Every action (profiled launch) of every range. `keep` receives the range objects, so that
    they outlive the actions taken from them (ncu_report does not document who owns what)."""
    actions = []
    for r in range(context.num_ranges()):
        rng = context.range_by_idx(r)
        if keep is not None:
            keep.append(rng)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            if action is None or not action.name() or not action.metric_names():
                raise ReportError(
                    f"{path} is truncated or corrupt: profiled launch {len(actions)} has no name or no metrics "
                    f"({_versions_note(mod, path)})"
                )
            actions.append(action)
    if not actions:
        raise ReportError(f"{path} holds no profiled kernel launch ({_versions_note(mod, path)})")
    return actions


def _names(action: Any) -> tuple[str, str | None, str | None]:
    function = action.name(action.NameBase_FUNCTION)
    demangled = action.name(action.NameBase_DEMANGLED) or None
    mangled = action.name(action.NameBase_MANGLED) or None
    return function or demangled or mangled or "", demangled, mangled


def list_kernels(path: Path) -> list[str]:
    """The function name of every profiled launch, in report order (a kernel profiled twice is listed twice)."""
    path = Path(path)
    _check_file(path)
    mod = load_ncu_report_module()
    if _needs_isolation(mod):
        return [str(name) for name in _run_isolated(mod, "list", path, None, 0)]
    return _list_in_process(mod, path)


def _list_in_process(mod: ModuleType, path: Path) -> list[str]:
    context = _load(mod, path)
    ranges: list[Any] = []
    return [_names(a)[0] for a in _actions(mod, context, path, ranges)]


def _matches(pattern: str, names: tuple[str, str | None, str | None]) -> bool:
    try:
        regex: re.Pattern[str] | None = re.compile(pattern)
    except re.error:
        regex = None
    for name in names:
        if name and (pattern in name or (regex is not None and regex.search(name))):
            return True
    return False


def _metric_value(mod: ModuleType, metric: Any) -> float | str | None:
    if not metric.has_value():
        return None
    kind = metric.kind()
    im = mod.IMetric
    if kind == im.ValueKind_STRING:
        text = metric.as_string()
        return text if text is not None else ""
    if kind in (im.ValueKind_UINT32, im.ValueKind_UINT64):
        return float(metric.as_uint64())
    if kind in (im.ValueKind_DOUBLE, im.ValueKind_FLOAT):
        return float(metric.as_double())
    return None  # ANY / UNKNOWN: no usable value


def _msg_kinds(mod: ModuleType) -> dict[int, RuleKind]:
    table: dict[int, RuleKind] = {}
    for attr, kind in (
        ("MsgType_NONE", "other"),
        ("MsgType_OK", "INF"),
        ("MsgType_OPTIMIZATION", "OPT"),
        ("MsgType_WARNING", "WRN"),
        ("MsgType_ERR", "ERR"),
    ):
        if hasattr(mod, attr):
            table[int(getattr(mod, attr))] = kind  # type: ignore[assignment]
    return table


def _speedup_types(mod: ModuleType) -> dict[int, str]:
    table = {}
    for attr, name in (("SpeedupType_LOCAL", "local"), ("SpeedupType_GLOBAL", "global")):
        if hasattr(mod, attr):
            table[int(getattr(mod, attr))] = name
    return table


def _rules(mod: ModuleType, action: Any) -> list[RuleResult]:
    kinds = _msg_kinds(mod)
    speedup_types = _speedup_types(mod)
    rules = []
    for rr in action.rule_results():
        kind: RuleKind = "other"
        message = ""
        title = None
        if rr.has_rule_message():
            msg = rr.rule_message()
            kind = kinds.get(int(msg.get("type", -1)), "other")
            message = _plain(msg.get("message") or "")
            title = msg.get("title") or None
        speedup = None
        speedup_type = None
        if rr.has_speedup_estimation():
            est = rr.speedup_estimation()
            speedup = float(est["speedup"])
            speedup_type = speedup_types.get(int(est["type"]))
        rules.append(
            RuleResult(
                rule_id=rr.rule_identifier(),
                name=rr.name(),
                section=rr.section_identifier() or None,
                kind=kind,
                message=message,
                estimated_speedup_pct=speedup,
                speedup_type=speedup_type,
                title=title,
            )
        )
    return rules


def _dim3(metrics: dict[str, Metric], prefix: str) -> tuple[int, int, int] | None:
    values = []
    for axis in "xyz":
        metric = metrics.get(f"{prefix}_{axis}")
        if metric is None or isinstance(metric.value, str):
            return None
        values.append(int(metric.value))
    return (values[0], values[1], values[2])


def read_report(path: Path, *, kernel: str | None = None, launch_index: int = 0) -> KernelProfile:
    """Read one profiled launch of a report.

    `kernel` is a substring of, or a regular expression searched in, the function, demangled or
    mangled name; `launch_index` picks among the launches that match (0 = the first in the report).
    """
    path = Path(path)
    _check_file(path)
    mod = load_ncu_report_module()
    if _needs_isolation(mod):
        return KernelProfile.model_validate(_run_isolated(mod, "read", path, kernel, launch_index))
    return _read_in_process(mod, path, kernel, launch_index)


def _read_in_process(mod: ModuleType, path: Path, kernel: str | None, launch_index: int) -> KernelProfile:
    context = _load(mod, path)
    ranges: list[Any] = []  # held until the end, with `context`, while metrics are read
    actions = _actions(mod, context, path, ranges)
    named = [(a, _names(a)) for a in actions]
    if kernel is not None:
        chosen = [(a, n) for a, n in named if _matches(kernel, n)]
        if not chosen:
            known = ", ".join(dict.fromkeys(n[0] for _, n in named))
            raise ReportError(f"no kernel matching {kernel!r} in report {path.name} (kernels: {known})")
    else:
        chosen = named
    if not 0 <= launch_index < len(chosen):
        what = f"matching {kernel!r}" if kernel is not None else "in the report"
        raise ReportError(
            f"launch_index {launch_index} is out of range: {len(chosen)} profiled launch(es) {what} in {path.name}"
        )
    action, (function, demangled, mangled) = chosen[launch_index]

    metrics: dict[str, Metric] = {}
    for name in action.metric_names():
        metric = action.metric_by_name(name)
        if metric is None:
            continue
        value = _metric_value(mod, metric)
        # left out: instanced-only metrics without an aggregate, value-less ones, and NaN/inf (one NaN,
        # derived_tempMetric4, in the fixture) so that a profile survives a JSON round trip
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            continue
        metrics[name] = Metric.model_construct(name=name, value=value, unit=metric.unit() or "")

    def _text(name: str) -> str | None:
        m = metrics.get(name)
        return m.value if m is not None and isinstance(m.value, str) and m.value else None

    major = metrics.get("device__attribute_compute_capability_major")
    minor = metrics.get("device__attribute_compute_capability_minor")
    cc = None
    if major is not None and minor is not None and not isinstance(major.value, str) and not isinstance(minor.value, str):
        cc = f"{int(major.value)}.{int(minor.value)}"

    return KernelProfile(
        kernel_name=function,
        demangled_name=demangled,
        mangled_name=mangled,
        grid=_dim3(metrics, "launch__grid_dim"),
        block=_dim3(metrics, "launch__block_dim"),
        device_name=_text("device__attribute_display_name"),
        compute_capability=cc,
        ncu_version=_report_ncu_version(path),
        metrics=metrics,
        rules=_rules(mod, action),
    )


# ---------------------------------------------------------------------------------------------------
# Reading in a child process
#
# ncu_report 2025.3.1 (the pip wheel, and the extras/python of Nsight Compute 2025.3.1) segfaults at the
# first IMetric.unit() call in a process that imported numpy before it: seen on an H200 host, Python
# 3.12.3 with numpy 2.5.2, raw ncu_report calls without kernelloop; ncu-report 2026.3.1 on the same host
# does not. A pytest plugin that imports numpy is enough to kill a whole test session. So when the
# module is older than 2026 and numpy is loaded, the report is read by a fresh interpreter that has
# not imported numpy, and the result comes back as JSON (a crash there becomes a ReportError).

_INPROCESS_ENV = "KERNELLOOP_NCU_INPROCESS"
_CHILD_CODE = "import sys; from kernelloop.tools.ncu_report_reader import _child_main; sys.exit(_child_main(sys.argv[1]))"


def _needs_isolation(mod: ModuleType) -> bool:
    if internal_value(_INPROCESS_ENV) == "1" or "numpy" not in sys.modules:
        return False
    match = re.match(r"(\d{4})\.", _module_version(mod))
    return match is None or int(match.group(1)) < 2026


def _child_argv(request: str) -> list[str]:
    return [sys.executable, "-c", _CHILD_CODE, request]


def _run_isolated(mod: ModuleType, op: str, path: Path, kernel: str | None, launch_index: int) -> Any:
    module_file = Path(str(getattr(mod, "__file__", "") or ""))
    module_root = module_file.parent if module_file.name == "ncu_report.py" else module_file.parent.parent
    package_root = Path(__file__).resolve().parents[2]  # the folder holding the kernelloop package
    env = dict(os.environ)
    env[_INPROCESS_ENV] = "1"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(module_root), str(package_root)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    request = json.dumps({"op": op, "path": str(path.resolve()), "kernel": kernel, "launch_index": launch_index})
    try:
        done = subprocess.run(_child_argv(request), capture_output=True, text=True, env=env, timeout=900)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ReportError(f"cannot read {path} in a helper process: {_one_line(exc)}") from exc
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or done.returncode != 0:
        how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit code {done.returncode}"
        raise ReportError(f"ncu_report crashed reading {path} ({how}; {_versions_note(mod, path)})")
    if "error" in answer:
        cls = NcuUnavailable if answer.get("kind") == "unavailable" else ReportError
        raise cls(str(answer["error"]))
    return answer["ok"]


def _child_main(request: str) -> int:
    """Entry point of the helper process: read, then print one JSON line."""
    args = json.loads(request)
    path = Path(args["path"])
    try:
        mod = load_ncu_report_module()
        if args["op"] == "list":
            result: Any = _list_in_process(mod, path)
        else:
            result = _read_in_process(mod, path, args["kernel"], int(args["launch_index"])).model_dump()
        answer: dict[str, Any] = {"ok": result}
    except KernelloopError as exc:
        answer = {"error": str(exc), "kind": "unavailable" if isinstance(exc, NcuUnavailable) else "report"}
    sys.stdout.write(json.dumps(answer) + "\n")
    return 0


# ---------------------------------------------------------------------------------------------------
# Headline numbers
#
# friendly key -> candidate ncu metric names; the first one present in the report wins. Names were
# checked against the `--set full` fixture (tests/fixtures/ncu, ncu 2025.3.1, sm_90). Units follow
# the key's suffix: *_pct in %, *_ns in ns, *_bytes in bytes, *_hz in Hz; the rest are plain counts
# or ratios. headline() converts time/byte/frequency units to those, whatever prefix ncu used.
#
# Not found in the fixture, and so not used:
#  * smsp__average_warp_latency_issue_stalled_<reason>.{ratio,pct}: not collected by `--set full`;
#    it is a different quantity from the WarpStateStats one below, so it is no fallback for it.
#  * l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_{ld,st}.ratio (sectors/request):
#    not collected; headline() derives it from l1tex__t_sectors_…_op_{ld,st}.sum / l1tex__t_requests_….sum.
#  * sm__sass_thread_inst_executed_op_{ffma,fadd,fmul,dfma,...}_pred_on.sum (absolute counts): the full
#    set has only the rates smsp__sass_thread_inst_executed_op_*_pred_on.sum.per_cycle_elapsed, so
#    headline() derives counts as rate x smsp__cycles_elapsed.avg (for the fixture: FFMA =
#    1298.84 x 826690.7 = 1.0737e9 = 1024^3, exact for a 1024^2 matmul).
#  * dram__throughput.avg.pct_of_peak_sustained_elapsed: not in this report (gpu__dram_throughput is);
#    kept as the fallback older reports use.

_STALL_REASONS = (
    "long_scoreboard",
    "short_scoreboard",
    "barrier",
    "membar",
    "mio_throttle",
    "lg_throttle",
    "tex_throttle",
    "math_pipe_throttle",
    "not_selected",
    "selected",
    "wait",
    "dispatch_stall",
    "branch_resolving",
    "drain",
    "sleeping",
    "imc_miss",
    "misc",
    "no_instruction",  # the pcsamp metric spells it no_instructions
)

_FLOP_OPS = ("ffma", "fadd", "fmul", "dfma", "dadd", "dmul", "hfma", "hadd", "hmul")

HEADLINE_METRICS: dict[str, list[str]] = {
    # GPU Speed Of Light section
    "sm_throughput_pct": ["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
    "memory_throughput_pct": ["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"],
    "dram_throughput_pct": [
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    ],
    # the SOL section's "L1/TEX Cache Throughput" is the *active* one (96.15 % in the fixture; elapsed: 92.44 %)
    "l1tex_throughput_pct": [
        "l1tex__throughput.avg.pct_of_peak_sustained_active",
        "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
    ],
    "l2_throughput_pct": ["lts__throughput.avg.pct_of_peak_sustained_elapsed"],
    "duration_ns": ["gpu__time_duration.sum"],
    "elapsed_cycles": ["gpc__cycles_elapsed.max"],
    "sm_frequency_hz": ["gpc__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second"],
    "dram_frequency_hz": ["dram__cycles_elapsed.avg.per_second"],
    # Memory Workload Analysis
    "l1_hit_rate_pct": ["l1tex__t_sector_hit_rate.pct"],
    "l2_hit_rate_pct": ["lts__t_sector_hit_rate.pct"],
    "dram_read_bytes": ["dram__bytes_read.sum"],
    "dram_write_bytes": ["dram__bytes_write.sum"],
    "dram_bytes_per_s": ["dram__bytes.sum.per_second"],
    # coalescing: bytes of each 32-byte sector the threads used (32 = perfectly coalesced)
    "global_load_bytes_per_sector": ["smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio"],
    "global_store_bytes_per_sector": ["smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio"],
    "global_load_sectors": ["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"],
    "global_load_requests": ["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"],
    "global_store_sectors": ["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"],
    "global_store_requests": ["l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"],
    "global_load_sectors_per_request": ["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"],
    "global_store_sectors_per_request": ["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio"],
    # global atomics/reductions, and how unevenly they load the L2 slices' atomic units
    # (a hot address keeps one slice busy while the rest idle: contention)
    "global_red_instructions": ["smsp__inst_executed_op_global_red.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum"],
    # (warp-level requests: the full set has no executed-instruction count for ATOM)
    "global_atom_instructions": ["smsp__inst_executed_op_global_atom.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum"],
    "l2_atomic_busy_max_pct": ["lts__d_atomic_input_cycles_active.max.pct_of_peak_sustained_elapsed"],
    "l2_atomic_busy_avg_pct": ["lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed"],
    # shared memory bank conflicts (extra wavefronts) and the wavefronts they add to
    "shared_bank_conflicts": ["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"],
    "shared_load_bank_conflicts": ["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"],
    "shared_store_bank_conflicts": ["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"],
    "shared_wavefronts": ["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"],
    "local_spill_requests": ["derived__local_spilling_requests"],
    # Occupancy and launch
    "achieved_occupancy_pct": ["sm__warps_active.avg.pct_of_peak_sustained_active"],
    "theoretical_occupancy_pct": ["sm__maximum_warps_per_active_cycle_pct"],
    "achieved_warps_per_sm": ["sm__warps_active.avg.per_cycle_active"],
    "occupancy_limit_registers": ["launch__occupancy_limit_registers"],
    "occupancy_limit_shared_mem": ["launch__occupancy_limit_shared_mem"],
    "occupancy_limit_warps": ["launch__occupancy_limit_warps"],
    "occupancy_limit_blocks": ["launch__occupancy_limit_blocks"],
    "registers_per_thread": ["launch__registers_per_thread"],
    "shared_mem_static_per_block_bytes": ["launch__shared_mem_per_block_static"],
    "shared_mem_dynamic_per_block_bytes": ["launch__shared_mem_per_block_dynamic"],
    # static + dynamic is derived below; this is what the driver allots (includes its 1 KiB reserve)
    "shared_mem_allocated_per_block_bytes": ["launch__shared_mem_per_block_allocated", "launch__shared_mem_per_block"],
    "waves_per_sm": ["launch__waves_per_multiprocessor"],
    "grid_size": ["launch__grid_size"],
    "block_size": ["launch__block_size"],
    # Scheduler / warp state
    "issue_active_pct": ["smsp__issue_active.avg.pct_of_peak_sustained_active"],
    "warp_cycles_per_issued_inst": ["smsp__average_warp_latency_per_inst_issued.ratio"],
    # stall_<reason>: cycles per issued instruction a warp spends in that state (Warp State Statistics;
    # they add up to warp_cycles_per_issued_inst). stall_samples_<reason>: PC-sampling sample counts.
    **{
        f"stall_{reason}": [f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"]
        for reason in _STALL_REASONS
    },
    **{
        f"stall_samples_{reason}": [
            f"smsp__pcsamp_warps_issue_stalled_{'no_instructions' if reason == 'no_instruction' else reason}"
        ]
        for reason in _STALL_REASONS
    },
    # Instruction counts and roofline inputs
    "instructions_executed": ["smsp__inst_executed.sum"],
    "smsp_cycles_elapsed_avg": ["smsp__cycles_elapsed.avg"],
    **{f"{op}_count": [f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum"] for op in _FLOP_OPS},
    **{
        f"{op}_per_cycle": [f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed"]
        for op in _FLOP_OPS
    },
    "ffma_peak_per_cycle": ["sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"],
    "dfma_peak_per_cycle": ["sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained"],
    "hfma_peak_per_cycle": ["sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained"],
    "dram_peak_bytes_per_cycle": ["dram__bytes.sum.peak_sustained"],
    # Device attributes
    "sm_count": ["device__attribute_multiprocessor_count", "launch__sm_count"],
    "sm_clock_rate_hz": ["device__attribute_clock_rate"],  # boost clock; profiling may lock lower
    "memory_clock_rate_hz": ["device__attribute_memory_clock_rate"],
    "memory_bus_width_bits": ["device__attribute_global_memory_bus_width"],
    "l2_cache_size_bytes": ["device__attribute_l2_cache_size"],
    "max_shared_memory_per_block_bytes": ["device__attribute_max_shared_memory_per_block"],
    "max_shared_memory_per_block_optin_bytes": ["device__attribute_max_shared_memory_per_block_optin"],
    "max_shared_memory_per_sm_bytes": ["device__attribute_max_shared_memory_per_multiprocessor"],
    "max_registers_per_block": ["device__attribute_max_registers_per_block"],
    "max_threads_per_block": ["device__attribute_max_threads_per_block"],
    "max_warps_per_sm": ["device__attribute_max_warps_per_multiprocessor"],
}

_TIME_TO_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
_BYTES = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12}
_HZ = {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}


def _scale(key: str, unit: str) -> float:
    """Factor that brings a value in `unit` to the unit the key's suffix promises."""
    base = unit.split("/", 1)[0].strip().lower()
    if key.endswith("_ns"):
        return _TIME_TO_NS.get(base, 1.0)
    if key.endswith("_bytes") or key.endswith("_bytes_per_s"):
        return _BYTES.get(base, 1.0)
    if key.endswith("_hz"):
        if key in ("sm_clock_rate_hz", "memory_clock_rate_hz") and base == "":
            return 1e3  # device__attribute_*clock_rate carry no unit; CUDA reports them in kHz
        return _HZ.get(base, 1.0)
    return 1.0


def _first(profile: KernelProfile, key: str) -> float | None:
    for name in HEADLINE_METRICS.get(key, ()):
        metric = profile.metrics.get(name)
        if metric is not None and not isinstance(metric.value, str):
            return float(metric.value) * _scale(key, metric.unit)
    return None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def headline(profile: KernelProfile) -> dict[str, float | None]:
    """The numbers a diagnosis starts from: every HEADLINE_METRICS key plus a few derived ones (None = absent)."""
    out: dict[str, float | None] = {key: _first(profile, key) for key in HEADLINE_METRICS}

    static, dynamic = out["shared_mem_static_per_block_bytes"], out["shared_mem_dynamic_per_block_bytes"]
    out["shared_mem_per_block"] = static + dynamic if static is not None and dynamic is not None else None

    for kind in ("load", "store"):
        if out[f"global_{kind}_sectors_per_request"] is None:
            out[f"global_{kind}_sectors_per_request"] = _ratio(out[f"global_{kind}_sectors"], out[f"global_{kind}_requests"])

    cycles = out["smsp_cycles_elapsed_avg"]
    for op in _FLOP_OPS:  # thread-instruction counts from the per-cycle rates the full set collects
        if out[f"{op}_count"] is None and out[f"{op}_per_cycle"] is not None and cycles is not None:
            out[f"{op}_count"] = out[f"{op}_per_cycle"] * cycles  # type: ignore[operator]

    def _flops(fma: str, add: str, mul: str) -> float | None:
        parts = [out[f"{fma}_count"], out[f"{add}_count"], out[f"{mul}_count"]]
        if all(p is None for p in parts):
            return None
        return 2 * (parts[0] or 0.0) + (parts[1] or 0.0) + (parts[2] or 0.0)

    out["fp32_flops"] = _flops("ffma", "fadd", "fmul")
    out["fp64_flops"] = _flops("dfma", "dadd", "dmul")
    sm_hz = out["sm_frequency_hz"]
    out["peak_fp32_flops_per_s"] = (
        2 * out["ffma_peak_per_cycle"] * sm_hz if out["ffma_peak_per_cycle"] is not None and sm_hz else None
    )
    out["peak_fp64_flops_per_s"] = (
        2 * out["dfma_peak_per_cycle"] * sm_hz if out["dfma_peak_per_cycle"] is not None and sm_hz else None
    )
    dram_hz = out["dram_frequency_hz"]
    out["peak_dram_bytes_per_s"] = (
        out["dram_peak_bytes_per_cycle"] * dram_hz if out["dram_peak_bytes_per_cycle"] is not None and dram_hz else None
    )
    dram_bytes = None
    if out["dram_read_bytes"] is not None or out["dram_write_bytes"] is not None:
        dram_bytes = (out["dram_read_bytes"] or 0.0) + (out["dram_write_bytes"] or 0.0)
    out["dram_bytes"] = dram_bytes
    out["fp32_flops_per_dram_byte"] = _ratio(out["fp32_flops"], dram_bytes)
    duration_s = out["duration_ns"] / 1e9 if out["duration_ns"] else None
    out["fp32_flops_per_s"] = _ratio(out["fp32_flops"], duration_s)
    return out
