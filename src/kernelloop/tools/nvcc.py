"""nvcc: find it, and build a program as two translation units with a content-hash cache.

Translation unit 1 is the preamble + an editable part, unit 2 the preamble + the frozen
harness. After compiling, every global symbol of unit 1 except the functions the harness
calls is made local (objcopy), so an editable part cannot interpose on printf,
cudaEventElapsedTime or any other function the harness or the libraries define.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

from ..errors import ConfigError, EnvironmentProblem
from ..package_files import package_path
from .module_memory import ModuleMemoryUnread, module_memory_unit, object_module_memory
from .sandbox import Limits, private_workdir, run_sandboxed
from .symbols import bare_name, demangle
from .toolkit import find_toolkit_program, real_nvcc

BUILD_RECIPE_VERSION = "17"  # bump when the build steps or what a build records change, to invalidate the cache
_ARCH = re.compile(r"^sm_(\d{2,3})([af]?)$")
# Warnings the split itself causes (a preamble constant unused in one unit).
_SUPPRESSED = ["-diag-suppress", "177,550"]
_PTX_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$.]+)\s*\(", re.M)


class Toolchain(BaseModel):
    nvcc: Path
    version: str  # "13.0"
    banner: str
    # The nvcc flags the user's program ships with (verify.build_flags): every build made through
    # this toolchain adds them, so what is verified is the build the user ships (language_flags).
    build_flags: tuple[str, ...] = ()


class ObjectSymbols(BaseModel):
    defined_global: list[str]  # strong and weak
    undefined: list[str]
    defined_weak: list[str] = []  # template instantiations, inline functions (COMDAT)
    defined_data: list[str] = []  # global variables (data, bss, read-only data), not functions


class BuildResult(BaseModel):
    ok: bool
    stage: str  # "compile editable" | "compile harness" | "link" | "done"
    log: str
    binary: Path | None = None
    editable_object: Path | None = None
    editable_symbols: ObjectSymbols | None = None
    harness_symbols: ObjectSymbols | None = None
    kept_global: list[str] = []
    harness_kernels: list[str] = []  # __global__ functions the frozen harness itself defines (PTX .entry)
    editable_kernels: list[str] = []  # filled only when the harness has kernels of its own
    flags: list[str] = []
    cached: bool = False
    seconds: float = 0.0
    key: str = ""


def find_toolchain(nvcc: str | None = None, build_flags: Sequence[str] = ()) -> Toolchain:
    """nvcc on PATH (or NVCC), with the user's build flags (verify.build_flags) every build adds."""
    return _toolchain(nvcc).model_copy(update={"build_flags": tuple(build_flags)})


@lru_cache(maxsize=4)
def _toolchain(nvcc: str | None) -> Toolchain:
    path = shutil.which(nvcc or "nvcc")
    if path is None:
        raise EnvironmentProblem(
            "nvcc not found on PATH; install the CUDA toolkit (or pass --nvcc PATH), then run `kernelloop doctor`"
        )
    try:
        banner = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentProblem(f"{path} --version failed ({exc}); check the CUDA toolkit install") from exc
    m = re.search(r"release (\d+\.\d+)", banner)
    if not m:
        raise EnvironmentProblem(f"{path} does not look like nvcc (no 'release X.Y' in --version)")
    return Toolchain(nvcc=Path(path), version=m.group(1), banner=banner.strip().splitlines()[-1])


def arch_flags(arch: str) -> list[str]:
    """`sm_90` → -arch=sm_90; the a/f variants need the explicit -gencode form."""
    m = _ARCH.match(arch)
    if not m:
        raise ConfigError(f"--arch {arch!r} is not an nvcc architecture like sm_90 or sm_90a")
    if m.group(2):
        return [f"-gencode=arch=compute_{m.group(1)}{m.group(2)},code=sm_{m.group(1)}{m.group(2)}"]
    return [f"-arch={arch}"]


def language_flags(toolchain: Toolchain, arch: str, *, iso_dialect: bool = True) -> list[str]:
    """The dialect, the architecture and the user's build flags of every build: -std=c++17 (or the
    compiler's default, gnu++17, where `iso_dialect` is False) unless the build flags name a -std."""
    chosen = [f for f in toolchain.build_flags if f.startswith("-std=")]
    dialect = chosen[-1:] or (["-std=c++17"] if iso_dialect else [])
    return [*dialect, *arch_flags(arch), *(f for f in toolchain.build_flags if not f.startswith("-std="))]


def build_flags_notes(toolchain: Toolchain) -> list[str]:
    """What a verdict says of the build it answers for."""
    if not toolchain.build_flags:
        return []
    return [f"built with your build flags ({' '.join(toolchain.build_flags)}): the verdict is for that build"]


class IncludeCheck(BaseModel):
    ok: bool
    outside: list[str] = []  # files opened outside the toolkit and system headers
    problem: str | None = None


def system_include_roots(tc: Toolchain) -> list[Path]:
    """Where legitimate headers live: the CUDA toolkit and the host compiler's system dirs."""
    real = real_nvcc(tc.nvcc)  # symlinks and wrapper scripts followed, as every tool search does
    return [real.parent.parent.resolve(), Path("/usr/include"), Path("/usr/lib/gcc"), Path("/usr/lib64/gcc"),
            Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/lib/aarch64-linux-gnu")]


def check_includes(unit: str, *, arch: str, toolchain: Toolchain, limits: Limits,
                   name: str = "candidate.cu") -> IncludeCheck:
    """List every file the preprocessor opens for `unit` (nvcc -M, in the sandbox) and
    refuse any outside the toolkit and system headers: whatever spelling reached it
    (line splices, digraphs, macros), an #include of a user file could echo its contents
    into compiler messages."""
    roots = [str(r) for r in system_include_roots(toolchain)]
    with private_workdir() as work:
        (work / name).write_text(unit)
        shutil.chown(work / name, user=work.stat().st_uid, group=work.stat().st_gid)
        run = run_sandboxed([str(toolchain.nvcc), *language_flags(toolchain, arch), "-M", name],
                            workdir=work, limits=limits)
        if not run.ok:
            # Diagnostics are withheld on purpose: they could quote an included file.
            return IncludeCheck(ok=False, problem=f"preprocessing failed ({run.failure()})")
        deps = run.stdout.replace("\\\n", " ").split(":", 1)[-1].split()
        outside = []
        for dep in deps:
            path = os.path.realpath(dep if os.path.isabs(dep) else os.path.join(work, dep))
            if path.startswith(str(work.resolve()) + os.sep) and Path(path).name == name:
                continue
            if not os.path.exists(path):
                # A name from a #line directive, not a file the preprocessor opened: the user's
                # headers inlined into the frozen preamble keep their names for messages.
                continue
            if not any(path == r or path.startswith(r + os.sep) for r in roots):
                outside.append(path)
        return IncludeCheck(ok=not outside, outside=outside)


class HostPass(BaseModel):
    ok: bool
    lines: list[tuple[int, str]] = []  # (line in the unit, host code) the unit itself contributes
    problem: str | None = None


_LINE_MARKER = re.compile(r'^#\s*(?:line\s+)?(\d+)\s+"([^"]*)"')


def host_pass(unit: str, *, arch: str, toolchain: Toolchain, limits: Limits, name: str = "candidate.cu") -> HostPass:
    """The host code nvcc hands the host compiler for `unit` (nvcc --cuda: preprocessed, device
    function bodies removed), cut to the lines the unit itself contributes. What a source scan
    reads and what the host compiler compiles can differ (`#ifdef __CUDA_ARCH__` around a
    `__device__`, macros); this is the latter."""
    with private_workdir() as work:
        (work / name).write_text(unit)
        shutil.chown(work / name, user=work.stat().st_uid, group=work.stat().st_gid)
        # The real build's options (-O3 defines __OPTIMIZE__, which a macro can turn a function's
        # __device__ into __host__ with: red team round 65), so this is the host code it compiles.
        run = run_sandboxed([str(toolchain.nvcc), "-O3", *language_flags(toolchain, arch), *UNFORTIFIED, "--cuda", name,
                             "-o", "host.ii"],
                            workdir=work, limits=limits)
        out = work / "host.ii"
        if not run.ok or not out.exists():
            return HostPass(ok=False, problem=f"the host pass failed ({run.failure()})")
        lines: list[tuple[int, str]] = []
        current, number = "", 0
        for text in out.read_text(errors="replace").splitlines():
            if m := _LINE_MARKER.match(text):
                number, current = int(m.group(1)), m.group(2)
                continue
            if os.path.basename(current) == name and text.strip():
                lines.append((number, text))
            number += 1
        return HostPass(ok=True, lines=lines)


class Preprocessed(BaseModel):
    ok: bool
    part: str = ""  # the unit's own lines after preprocessing (macros expanded), in order
    header_macros: dict[str, str] = {}  # macros the toolkit's and system's headers define: name -> body
    program_macros: dict[str, str] = {}  # macros the program's own frozen code defines (preamble, its headers)
    program_code: str = ""  # the program's own frozen code after preprocessing (the unit less the part)
    part_include_ends: list[int] = []  # for each #include the part really has, the part's line after it
    problem: str | None = None


_DEFINE_LINE = re.compile(r"^#define ([A-Za-z_]\w*)(\([^)]*\))?\s?(.*)$")


def preprocess_unit(unit: str, *, arch: str, toolchain: Toolchain, limits: Limits,
                    name: str = "candidate.cu", options: tuple[str, ...] = ()) -> Preprocessed:
    """The unit as the compiler reads it (nvcc -E, macro definitions kept): the lines `name` itself
    contributes, with every macro expanded, and the macros the headers define. What a text scan of
    the source cannot see (a header's macro that expands to `__builtin_LINE()`, a name built by an
    identity macro) is plain here. OPTIONS: another build's (`-DDEBUG`, `-rdc=true`), as it would read the unit."""
    with private_workdir() as work:
        (work / "unit.cu").write_text(unit)
        shutil.chown(work / "unit.cu", user=work.stat().st_uid, group=work.stat().st_gid)
        run = run_sandboxed([str(toolchain.nvcc), *language_flags(toolchain, arch), *options, "-E",
                             "-Xcompiler", "-dD", "unit.cu", "-o", "unit.ii"], workdir=work, limits=limits)
        out = work / "unit.ii"
        if not run.ok or not out.exists():
            return Preprocessed(ok=False, problem=f"preprocessing failed ({run.failure()})")
        part: list[str] = []
        program: list[str] = []
        macros: dict[str, str] = {}
        own: dict[str, str] = {}
        current = ""
        include_ends: list[int] = []
        for text in out.read_text(errors="replace").splitlines():
            if m := _LINE_MARKER.match(text):
                # back in the part from a header (flag 2): the compiler's own word on where an
                # #include ended, whatever comments or skipped groups hold lines that look like one
                if os.path.basename(m.group(2)) == name and os.path.basename(current) != name and \
                        re.search(r'"\s+2(?:\s|$)', text):
                    include_ends.append(int(m.group(1)))
                current = m.group(2)
                continue
            if os.path.basename(current) == name:
                if not text.startswith("#"):
                    part.append(text)
            # Headers the preprocessor opened have absolute paths; the user's own headers, inlined into
            # the frozen preamble under their bare names, are the program's code (a cuda-samples
            # `checkCudaErrors` passes the line to its message, honestly), like the preamble itself.
            elif (d := _DEFINE_LINE.match(text)) and not current.startswith("<"):  # not <built-in>, <command-line>
                (macros if current.startswith("/") else own)[d.group(1)] = (d.group(2) or "") + " " + d.group(3)
            elif not current.startswith(("/", "<")) and not text.startswith("#"):
                program.append(text)
        return Preprocessed(ok=True, part="\n".join(part), header_macros=macros, program_macros=own,
                            program_code="\n".join(program), part_include_ends=include_ends)


_DIAGNOSTIC = re.compile(r"(?:\(\d+\)|:\d+(?::\d+)?):\s*(?:fatal\s+)?error\b|^\S*(?:ld|collect2|ptxas)\b.*\berror\b|"
                         r"undefined reference|multiple definition", re.I)


def compiler_error(log: str) -> str:
    """The line of a build's log that says what is wrong: the first diagnostic (`file(12): error: ...`,
    `file:3:5: error: ...`, a linker's or ptxas' error), not nvcc's closing "2 errors detected";
    else the first line naming an error, else the log's last line."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    explained = [ln for ln in lines if ln.startswith("[link] ") and not ln.startswith("[link] nvcc")]
    if explained:  # explain_link_failure's sentence names the cause
        return explained[0]
    return next((ln for ln in lines if _DIAGNOSTIC.search(ln)),
                next((ln for ln in lines if "error" in ln.lower() and "errors detected" not in ln), lines[-1] if lines else ""))


_TOOLKIT_MACROS: list[dict[str, str]] = []  # found once per process; a failure is not kept


def toolkit_macros() -> dict[str, str]:
    """The macros the CUDA toolkit's and the system's headers define in every unit (preprocess_unit of
    an empty one), name -> body as `-dD` prints it (`(params) text` for a function-like one):
    `__launch_bounds__`, `__maxnreg__`, `__cluster_dims__` and whatever attribute a newer toolkit adds,
    which a reading of the part's syntax would take for names it declares (red team round 63), and
    `__CUDA_ARCH_HAS_FEATURE__(X)`, which a condition means by its expansion (round 64). Empty when
    nvcc cannot run (the callers then fail closed; the next call tries again)."""
    if not _TOOLKIT_MACROS:
        try:
            expanded = preprocess_unit("", arch="sm_80", toolchain=find_toolchain(), limits=Limits(wall_timeout_s=120))
        except (EnvironmentProblem, ConfigError, OSError):
            return {}
        if not expanded.ok:
            return {}
        _TOOLKIT_MACROS.append(dict(expanded.header_macros))
    return _TOOLKIT_MACROS[0]


_GROUP_SIGNATURE = re.compile(r"^COMDAT group section \[\s*\d+\] `[^']*' \[(?P<signature>[^\]]+)\]", re.M)


def _comdat_signatures(obj: Path) -> set[str]:
    """The signatures of an object's COMDAT groups (readelf -g)."""
    out = subprocess.run(["readelf", "-gW", str(obj)], capture_output=True, text=True, timeout=60).stdout
    return {m.group("signature") for m in _GROUP_SIGNATURE.finditer(out)}


def object_symbols(obj: Path) -> ObjectSymbols:
    out = subprocess.run(["nm", "-P", str(obj)], capture_output=True, text=True, timeout=60).stdout
    defined, undefined, weak, data = [], [], [], []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U" or kind in ("w", "v") and len(parts) == 2:
            undefined.append(name)
        elif kind.isupper() or kind in ("i", "u"):  # an indirect function, a unique global: defined too (round 289)
            defined.append(name)
            if kind in ("W", "V"):
                weak.append(name)
            if kind in ("B", "D", "G", "R", "S", "V", "C"):
                data.append(name)
    return ObjectSymbols(defined_global=sorted(set(defined)), undefined=sorted(set(undefined)),
                         defined_weak=sorted(set(weak)), defined_data=sorted(set(data)))


# The libraries a program links (nvcc's link line: the CUDA runtime, librt, libpthread, libdl; g++'s: the C and
# C++ libraries, libm, libgcc).
_LINKED_LIBRARIES = ("libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "librt.so.1", "libpthread.so.0",
                     "libdl.so.2", "libgcc.a", "libc_nonshared.a")  # the last two: static parts of every program


@lru_cache(maxsize=4)
def library_symbols(nvcc: Path) -> frozenset[str]:
    """Every symbol the libraries a program built by NVCC links define (shared ones' dynamic tables, the static
    CUDA runtime's archive): a program's own strong definition of one replaces the library's for every caller,
    the runtime's internal calls included. A library g++ cannot locate is left out (nvcc builds with g++, so
    where a program builds its libraries are found)."""
    paths: list[str] = []
    for name in _LINKED_LIBRARIES:
        try:
            found = subprocess.run(["g++", f"-print-file-name={name}"], capture_output=True, text=True,
                                   timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if found and os.path.isabs(found) and os.path.exists(found):
            paths.append(found)
    try:  # nvcc's own link line names the folders of libcudart_static.a
        dry = subprocess.run([str(nvcc), "--dryrun", "-o", "kl_probe", "kl_probe.o"], capture_output=True, text=True,
                             timeout=60)
        folders = re.findall(r'"-L([^"]+)"|-L(\S+)', dry.stdout + dry.stderr)
    except (OSError, subprocess.SubprocessError):
        folders = []
    for folder in dict.fromkeys(a or b for a, b in folders):
        archive = Path(folder) / "libcudart_static.a"
        if archive.exists():
            paths.append(str(archive))
            break
    symbols: set[str] = set()
    for path in paths:
        dynamic = ["--dynamic"] if ".so" in Path(path).name else []
        try:
            out = subprocess.run(["nm", "-P", "-g", "--defined-only", *dynamic, path], capture_output=True, text=True,
                                 timeout=120).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        symbols.update(line.split()[0].split("@")[0] for line in out.splitlines() if line.strip()
                       and not line.endswith(":"))
    return frozenset(symbols)


HARNESS_HEADER = package_path("harness", "kernelloop_harness.cuh")
# The trusted header's kernels (input fill, gather, guard check, probes) live in namespace kl.
HARNESS_KERNEL_PREFIX = "_ZN2kl"
_HARNESS_INCLUDE = "klinclude"  # inside a build's workdir; only the harness unit is given it
_FIRST_INCLUDE = "klfirst"  # inside a build's workdir: headers found before the toolkit's (build_whole_object)


def harness_include_dir() -> Path:
    """The folder holding kernelloop_harness.cuh (contract v2's trusted harness)."""
    return HARNESS_HEADER.parent


def stage_harness_header(work: Path) -> list[str]:
    """Copy kernelloop_harness.cuh into a build's workdir; returns the nvcc flag that finds it."""
    folder = work / _HARNESS_INCLUDE
    folder.mkdir()
    shutil.copy2(HARNESS_HEADER, folder / HARNESS_HEADER.name)
    for path in (folder, folder / HARNESS_HEADER.name):
        shutil.chown(path, user=work.stat().st_uid, group=work.stat().st_gid)
    return [f"-I{_HARNESS_INCLUDE}"]


def _harness_header_digest() -> str:
    return hashlib.sha256(HARNESS_HEADER.read_bytes()).hexdigest()


# Every build kernelloop compiles and reads leaves the C library's fortified wrappers off, whatever
# the machine's compiler turns on by default (Ubuntu's gcc does, as on the lent H200 host): under
# them `fprintf(stderr, "...")` lowers to `__fprintf_chk` in ISO C++ and to `fwrite` in GNU C++, so
# the gate's and init's comparisons of the two dialects refused an honest launcher's error print
# (kept-aside set 13's polyval), and the code verified on one machine was not the code verified on
# another. One setting for the verified build and every reading of it: a candidate that picks its
# kernel by whether the wrappers are declared (red team round 127 (d)) is verified as built without
# them, like any other build configuration a program can probe (docs/verifier.md, known limits).
UNFORTIFIED = ["-Xcompiler", "-U_FORTIFY_SOURCE"]


def build_program(
    editable_unit: str,
    harness_unit: str,
    *,
    arch: str,
    cache_dir: Path,
    toolchain: Toolchain | None = None,
    limits: Limits | None = None,
    extra_flags: list[str] | None = None,
    exports: list[str] | None = None,
) -> BuildResult:
    """Compile both units, contain the editable unit's symbols, link; cached by content.

    `exports` are the only global symbols the editable unit may keep: for a baseline,
    None (what the harness needs from it); for a candidate, the baseline's exports, so a
    candidate defining `cudaEventElapsedTime` or `printf` keeps it local and harmless.
    """
    toolchain = toolchain or find_toolchain()
    flags = ["-O3", *language_flags(toolchain, arch), *UNFORTIFIED, *(extra_flags or [])]
    key = hashlib.sha256(
        json.dumps([BUILD_RECIPE_VERSION, toolchain.version, toolchain.banner, flags, editable_unit, harness_unit,
                    exports, _harness_header_digest()]).encode()
    ).hexdigest()[:32]
    out_dir = cache_dir / "builds" / key
    meta = out_dir / "build.json"
    if meta.exists():
        try:
            cached = BuildResult.model_validate_json(meta.read_text())
            # A record naming a binary outside its own entry is no record of this build.
            own = cached.binary is None or cached.binary.resolve().parent == out_dir.resolve()
            if own and (not cached.ok or (cached.binary and cached.binary.exists())):
                return cached.model_copy(update={"cached": True})
        except ValueError:
            pass
    limits = limits or Limits(wall_timeout_s=300, memory_bytes=8 << 30, max_processes=512)
    started = time.monotonic()
    harness_key = hashlib.sha256(json.dumps(["harness", BUILD_RECIPE_VERSION, toolchain.version, toolchain.banner, flags,
                                             harness_unit, _harness_header_digest()]).encode()).hexdigest()[:32]
    result = _build(editable_unit, harness_unit, flags, toolchain, limits, out_dir, exports,
                    harness_dir=cache_dir / "harness" / harness_key, arch=arch)
    result.seconds = time.monotonic() - started
    result.key = key
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = meta.with_suffix(".tmp")
    tmp.write_text(result.model_dump_json(indent=1))
    os.replace(tmp, meta)
    return result


def publish_build(work: Path, names: Sequence[str], out_dir: Path) -> None:
    """Put one build's outputs into the cache entry OUT_DIR all at once, and never change an entry
    another build (another process sharing the cache, or a thread) published first. Two compiles
    of one source are not byte-identical (nvcc names its temporary files after the process), and a
    reader that opens an object twice (the disassembly, then the relocations) must see one build,
    not half of each (a host-code scan once read a relocation at an offset the other build had)."""
    staging = out_dir.parent / f".{out_dir.name}.{os.getpid()}.{threading.get_ident()}.staging"
    staging.mkdir(parents=True, exist_ok=True)
    try:
        for name in names:
            shutil.copy2(work / name, staging / name)
        try:
            os.rename(staging, out_dir)  # atomic; fails where another build's entry already holds files
            return
        except OSError:
            pass
        for name in names:  # an entry left without some output (an older layout): fill in what is missing
            if not (out_dir / name).exists():
                os.replace(staging / name, out_dir / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _build(editable_unit: str, harness_unit: str, flags: list[str], tc: Toolchain, limits: Limits,
           out_dir: Path, exports: list[str] | None, harness_dir: Path, arch: str) -> BuildResult:
    logs: list[str] = []
    with private_workdir() as work:
        (work / "editable.cu").write_text(editable_unit)
        (work / "harness.cu").write_text(harness_unit)
        for path in work.iterdir():
            shutil.chown(path, user=work.stat().st_uid, group=work.stat().st_gid)
        stage_harness_header(work)  # the editable unit is compiled without this include path

        def nvcc(stage: str, args: list[str]) -> BuildResult | None:
            run = run_sandboxed([str(tc.nvcc), *flags, *_SUPPRESSED, *args], workdir=work, limits=limits)
            text = (run.stdout + run.stderr).strip()
            if text:
                logs.append(f"[{stage}]\n{text}")
            if not run.ok:
                reason = run.failure() or "failed"
                logs.append(f"[{stage}] nvcc {reason}")
                return BuildResult(ok=False, stage=stage, log="\n".join(logs), flags=flags)
            return None

        failed = nvcc("compile editable", ["-c", "editable.cu", "-o", "editable.o"])
        if failed:
            return failed
        # The harness unit is the baseline's whatever the candidate: compiled once per content.
        if (harness_dir / "kernels.json").exists() and (harness_dir / "harness.o").exists():
            shutil.copy2(harness_dir / "harness.o", work / "harness.o")
            shutil.chown(work / "harness.o", user=work.stat().st_uid, group=work.stat().st_gid)
            harness_kernels = json.loads((harness_dir / "kernels.json").read_text())
        else:
            failed = nvcc("compile harness", [f"-I{_HARNESS_INCLUDE}", "-c", "harness.cu", "-o", "harness.o"])
            if failed:
                return failed
            # Kernel names come from the device code (PTX), never from host symbols: an
            # extern "C" kernel may borrow any host symbol's name.
            failed = nvcc("list harness kernels", [f"-I{_HARNESS_INCLUDE}", "-ptx", "harness.cu", "-o", "harness.ptx"])
            if failed:
                return failed
            harness_kernels = sorted(set(_PTX_ENTRY.findall((work / "harness.ptx").read_text())))
            harness_dir.mkdir(parents=True, exist_ok=True)
            for name, write in (("harness.o", lambda t: shutil.copy2(work / "harness.o", t)),
                                ("kernels.json", lambda t: t.write_text(json.dumps(harness_kernels)))):
                tmp = harness_dir / f"{name}.{os.getpid()}.tmp"
                write(tmp)
                os.replace(tmp, harness_dir / name)  # kernels.json last: its presence means both are whole
        editable_kernels: list[str] = []
        if harness_kernels:
            failed = nvcc("list editable kernels", ["-ptx", "editable.cu", "-o", "editable.ptx"])
            if failed:
                return failed
            editable_kernels = sorted(set(_PTX_ENTRY.findall((work / "editable.ptx").read_text())))
        editable_syms = object_symbols(work / "editable.o")
        harness_syms = object_symbols(work / "harness.o")
        needed = set(harness_syms.undefined) & set(editable_syms.defined_global)
        keep = sorted(needed if exports is None else needed & set(exports))
        # Weak COMDAT definitions the harness defines too (the same template instantiation)
        # would be merged at link time, the harness's copy kept: the editable part's calls
        # would then run code the host-code scan never saw in its object (a red team gave
        # std::vector's growth function an empty body and borrowed the harness's memset).
        # They are renamed in the editable object, so each unit runs its own copy.
        harness_defined = set(harness_syms.defined_global)
        shared = sorted(s for s in editable_syms.defined_weak if s in harness_defined and not s.startswith("DW.ref."))
        # A group's signature need not be one of its symbols (a constructor's C1/C2 pair is
        # grouped under C5): a shared signature would still merge the groups and drop the
        # editable copy, leaving its renamed symbols undefined. Those are renamed too.
        shared += sorted((_comdat_signatures(work / "editable.o") & _comdat_signatures(work / "harness.o")) - set(shared))
        renamed = {s: f"__kl_editable_{k}_{s}" for k, s in enumerate(shared)}
        (work / "rename.txt").write_text("".join(f"{a} {b}\n" for a, b in renamed.items()))
        # Left global, because localizing them breaks the link and they cannot interpose:
        # DW.ref.* (hidden references to the EH personality routine) and the renamed COMDAT
        # copies (unique names now). A weak definition the harness *imports* from a library
        # is interposition: the policy gate rejects it.
        keep_linker = sorted([s for s in editable_syms.defined_global if s.startswith("DW.ref.")] + list(renamed.values()))
        # objcopy fails on an empty list; a name nothing defines keeps it meaningful.
        (work / "keep.txt").write_text("".join(f"{s}\n" for s in [*keep, *keep_linker] or ["__kernelloop_exports_nothing"]))
        rename = subprocess.run(
            ["objcopy", f"--redefine-syms={work / 'rename.txt'}", str(work / "editable.o"), str(work / "editable.own.o")],
            capture_output=True, text=True, timeout=60,
        )
        if rename.returncode != 0:
            logs.append(f"[rename shared definitions] objcopy exit {rename.returncode}\n{rename.stderr}")
            return BuildResult(ok=False, stage="contain symbols", log="\n".join(logs), flags=flags)
        contain = subprocess.run(
            ["objcopy", f"--keep-global-symbols={work / 'keep.txt'}", str(work / "editable.own.o"),
             str(work / "editable.local.o")],
            capture_output=True, text=True, timeout=60,
        )
        if contain.returncode != 0:
            logs.append(f"[contain symbols] objcopy exit {contain.returncode}\n{contain.stderr}")
            return BuildResult(ok=False, stage="contain symbols", log="\n".join(logs), flags=flags)
        linked, objects = "editable.local.o", ["harness.o"]
        if PART_STATE_RECORDER in harness_defined:
            problem = _link_part_state(work / "editable.local.o", work / "editable.link.o", editable_syms)
            if problem:
                logs.append(f"[part state] {problem}")
                return BuildResult(ok=False, stage="contain symbols", log="\n".join(logs), flags=flags)
            linked = "editable.link.o"
            # Every object of the part's module memory is read with its state (tools/module_memory.py)
            try:
                sections = object_module_memory(work / "editable.o", arch=arch,
                                                cuobjdump=find_toolkit_program("cuobjdump", tc.nvcc))
            except ModuleMemoryUnread as exc:
                logs.append(f"[module memory] {exc}")
                return BuildResult(ok=False, stage="module memory", log="\n".join(logs), flags=flags)
            (work / "module_memory.cpp").write_text(module_memory_unit(sections))
            shutil.chown(work / "module_memory.cpp", user=work.stat().st_uid, group=work.stat().st_gid)
            failed = nvcc("compile module memory table", ["-c", "module_memory.cpp", "-o", "module_memory.o"])
            if failed:
                return failed
            objects.append("module_memory.o")
        shutil.chown(work / linked, user=work.stat().st_uid, group=work.stat().st_gid)
        # Full RELRO: the GOT is read-only once the program starts, so no write can redirect
        # the harness's own library calls.
        failed = nvcc("link", [*objects, linked, "-Xlinker", "-z,relro,-z,now", "-o", "program"])
        if failed:
            cause = explain_link_failure(failed.log, editable_unit, harness_unit)
            if cause:
                failed.log += f"\n[link] {cause}"
            return failed
        publish_build(work, ("program", "editable.o"), out_dir)
    return BuildResult(
        ok=True, stage="done", log="\n".join(logs), binary=out_dir / "program",
        editable_object=out_dir / "editable.o", editable_symbols=editable_syms,
        harness_symbols=harness_syms, kept_global=keep, flags=flags,
        harness_kernels=harness_kernels, editable_kernels=editable_kernels,
    )


# The editable part's state between calls (kernelloop_harness.cuh, "The editable part's state
# between calls"): its writable data goes into sections of its own, whose bounds the linker
# names (__start_kl_part_data...), and its allocation and variable-registration calls go to the
# harness's recorders (__kl_part_<name>), which call the real function. Only where the harness
# defines the recorders (a v2 harness); a v1 program links as it is.
PART_STATE_RECORDER = "__kl_part_malloc"
PART_STATE_CALLS = (
    "malloc", "calloc", "aligned_alloc", "posix_memalign", "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t",
    "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t", "cudaMalloc", "cudaMallocAsync",
    "cudaMallocPitch", "cudaMalloc3D", "cudaMallocArray", "cudaMalloc3DArray", "cudaFree", "cudaFreeAsync",
    "cudaFreeArray", "__cudaRegisterVar", "__cudaRegisterFunction", "cudaFuncSetAttribute", "cudaFuncSetCacheConfig",
    # driver objects the part holds, counted (red team round 341: a texture object created per call, its handle
    # a call counter)
    "cudaCreateTextureObject", "cudaDestroyTextureObject", "cudaCreateSurfaceObject", "cudaDestroySurfaceObject",
    "cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority", "cudaStreamDestroy",
    "cudaEventCreate", "cudaEventCreateWithFlags", "cudaEventDestroy", "cudaGraphCreate", "cudaStreamEndCapture",
    "cudaGraphDestroy", "cudaGraphInstantiate", "cudaGraphInstantiateWithFlags", "cudaGraphInstantiateWithParams",
    "cudaGraphExecDestroy",
    # what a per-thread default stream build (--default-stream per-thread) names four of them (cuda_runtime_api.h)
    "cudaMallocAsync_ptsz", "cudaFreeAsync_ptsz", "cudaStreamEndCapture_ptsz", "cudaGraphInstantiateWithParams_ptsz",
)
_WRITABLE_DATA = re.compile(r"^\.(?:data|bss)(?:\..*)?$")
_SECTION_ROW = re.compile(r"^\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S*)")


def writable_data_sections(obj: Path) -> list[tuple[str, bool]]:
    """(name, holds no bytes in the file: .bss) of each section of OBJ that holds writable data
    the program can change after it starts (not .data.rel.ro: read-only once relocated)."""
    out = subprocess.run(["readelf", "-SW", str(obj)], capture_output=True, text=True, timeout=60).stdout
    found: list[tuple[str, bool]] = []
    for line in out.splitlines():
        m = _SECTION_ROW.match(line)
        if m and _WRITABLE_DATA.match(m.group(1)) and not m.group(1).startswith(".data.rel.ro") and "W" in m.group(3):
            found.append((m.group(1), m.group(2) == "NOBITS"))
    return found


def _link_part_state(obj: Path, out: Path, symbols: ObjectSymbols) -> str | None:
    """OBJ with its writable data in kl_part_data/kl_part_bss and its allocation calls sent to the
    harness's recorders, as OUT; or why that could not be done."""
    defined = set(symbols.defined_global) | set(symbols.defined_data)
    # A suffixed variant of a recorded call the harness has no recorder for would act unrecorded: refused (the
    # per-thread default stream build's names of recorded calls are recorded themselves).
    for name in symbols.undefined:
        base = re.sub(r"(?:_v\d+)?(?:_ptds|_ptsz)?$", "", name)
        if base != name and base in PART_STATE_CALLS and name not in PART_STATE_CALLS:
            return (f"the editable part calls {name}, a variant of {base} that the harness cannot record "
                    f"(its state check reads what the part allocates): call {base}")
    args = ["objcopy"]
    for name, nobits in dict.fromkeys(writable_data_sections(obj)):
        args.append(f"--rename-section={name}={'kl_part_bss' if nobits else 'kl_part_data'}")
    for name in PART_STATE_CALLS:
        if name in symbols.undefined and name not in defined:
            args.append(f"--redefine-sym={name}=__kl_part_{name}")
    done = subprocess.run([*args, str(obj), str(out)], capture_output=True, text=True, timeout=60)
    return None if done.returncode == 0 else f"objcopy exit {done.returncode}: {done.stderr.strip()[:500]}"


def build_whole_program(source: str, *, arch: str, cache_dir: Path, toolchain: Toolchain | None = None,
                        limits: Limits | None = None) -> BuildResult:
    """Compile a program as it is, one translation unit (for profiling the user's own file)."""
    return _build_whole(source, arch=arch, cache_dir=cache_dir, toolchain=toolchain, limits=limits, object_only=False)


def build_whole_object(source: str, *, arch: str, cache_dir: Path, toolchain: Toolchain | None = None,
                       limits: Limits | None = None, optimised: bool = False, filename: str = "program.cu",
                       iso_dialect: bool = True, harness_visible: bool = True,
                       extra_flags: tuple[str, ...] = (),
                       include_first: tuple[tuple[str, str], ...] = ()) -> BuildResult:
    """Compile a program's one translation unit to an object for reading what each function
    touches, a section per function and variable; its device code as PTX beside it (`program.ptx`).
    Unoptimised, every function keeps its own symbol; `optimised`, the source sees the macros the
    real build defines (-O3: `__OPTIMIZE__`), with no function folded into another by the compiler.
    `filename`: the file's name on disk (nvcc names anonymous namespaces by it); `iso_dialect`: -std=c++17,
    as the verifier builds, else the compiler's default (gnu++17), as docs/contract.md's command does;
    `harness_visible`: the harness header staged beside the file and on the include path, as every
    kernelloop build has it, else neither (a user's file built as they build it). Without the C
    library's fortified wrappers, as every kernelloop build (UNFORTIFIED). `extra_flags`: another
    build's options (`-DDEBUG`, `-rdc=true`). `include_first`: headers (path relative to an include
    folder, text) staged in a folder searched before every other, the toolkit's and the system's too."""
    return _build_whole(source, arch=arch, cache_dir=cache_dir, toolchain=toolchain, limits=limits, object_only=True,
                        optimised=optimised, filename=filename, iso_dialect=iso_dialect,
                        harness_visible=harness_visible, extra_flags=extra_flags, include_first=include_first)


def _build_whole(source: str, *, arch: str, cache_dir: Path, toolchain: Toolchain | None, limits: Limits | None,
                 object_only: bool, optimised: bool = True, filename: str = "program.cu",
                 iso_dialect: bool = True, harness_visible: bool = True, extra_flags: tuple[str, ...] = (),
                 include_first: tuple[tuple[str, str], ...] = ()) -> BuildResult:
    toolchain = toolchain or find_toolchain()
    # An object for reading: a section per function and variable, so every reference from one
    # function to another is a relocation; optimised, no automatic inlining, cloning or merging
    # either (round 24: `#ifdef __OPTIMIZE__` hid a variable from the -O0 reading).
    reading = ["-c", "-Xcompiler", "-ffunction-sections,-fdata-sections"
               + (",-fno-inline-functions,-fno-inline-small-functions,-fno-inline-functions-called-once,"
                  "-fno-partial-inlining,-fno-ipa-cp,-fno-ipa-sra,-fno-ipa-icf,-fno-ipa-cp-clone" if optimised else "")] \
        if object_only else []
    flags = ["-O3" if optimised else "-O0", *language_flags(toolchain, arch, iso_dialect=iso_dialect), *UNFORTIFIED,
             *extra_flags, *reading]
    output = "program.o" if object_only else "program"
    includes = [f"-I{_HARNESS_INCLUDE}"] if harness_visible else []
    first = [f"-I{_FIRST_INCLUDE}"] if include_first else []  # before the user's own -I too
    key = hashlib.sha256(json.dumps(["whole", BUILD_RECIPE_VERSION, toolchain.banner, flags, source, filename,
                                     _harness_header_digest(), harness_visible]
                                    + ([list(map(list, include_first))] if include_first else [])).encode()).hexdigest()[:32]
    out_dir = cache_dir / "builds" / key
    outputs = [output, "program.ptx", PTXAS_REPORT] if object_only else [output]
    # Several threads may want one build at once (the shipped-build checks run in parallel and share
    # the baseline's builds): the first builds it, the others wait and find it in the cache.
    with _build_lock(str(out_dir)):
        if all((out_dir / name).exists() for name in outputs):
            return BuildResult(ok=True, stage="done", log="", binary=out_dir / output, flags=flags, cached=True,
                               key=key)
        return _compile_whole(source, toolchain=toolchain, limits=limits, flags=flags, filename=filename,
                              output=output, outputs=outputs, out_dir=out_dir, key=key, object_only=object_only,
                              harness_visible=harness_visible, include_first=include_first, first=first,
                              includes=includes)


# ptxas's -v report of an object build, beside it: `ptxas info    : Function properties for f` and the line under it
PTXAS_REPORT = "ptxas.txt"
_PTXAS_REPORT_LINE = re.compile(r"^(?:ptxas info\s*:|\s+\d+ bytes stack frame\b)")
_SPILL_STORES = re.compile(r"\b(\d+) bytes spill stores\b")


def ptxas_saves_registers(report: str) -> bool:
    """Whether ptxas's -v REPORT shows it storing registers in local memory itself, out of the PTX's sight: a
    spill, a callee saving its caller's registers in its frame (`144 bytes spill stores` for some function). A
    report that gives no function's figure is read as yes (fail closed)."""
    counts = [int(n) for n in _SPILL_STORES.findall(report)]
    return not counts or any(counts)


def ptxas_report(ptx: str, *, arch: str, toolchain: Toolchain, limits: Limits) -> str:
    """ptxas's -v report of a PTX module for ARCH (as the build's own ptxas step makes it), in the sandbox; "" where
    ptxas is not found or fails (ptxas_saves_registers reads that as yes)."""
    ptxas = find_toolkit_program("ptxas", toolchain.nvcc)
    m = _ARCH.match(arch)
    if ptxas is None or m is None:
        return ""
    with private_workdir() as work:
        (work / "unit.ptx").write_text(ptx)
        shutil.chown(work / "unit.ptx", user=work.stat().st_uid, group=work.stat().st_gid)
        run = run_sandboxed([str(ptxas), f"-arch={arch}", "-O3", "-v", "unit.ptx", "-o", "unit.cubin"], workdir=work,
                            limits=limits)
    return (run.stdout + run.stderr) if run.ok else ""


_BUILD_LOCKS: dict[str, threading.Lock] = {}
_BUILD_LOCKS_GUARD = threading.Lock()


def _build_lock(key: str) -> threading.Lock:
    with _BUILD_LOCKS_GUARD:
        return _BUILD_LOCKS.setdefault(key, threading.Lock())


def _compile_whole(source: str, *, toolchain: Toolchain, limits: Limits | None, flags: list[str], filename: str,
                   output: str, outputs: list[str], out_dir: Path, key: str, object_only: bool,
                   harness_visible: bool, include_first: tuple[tuple[str, str], ...], first: list[str],
                   includes: list[str]) -> BuildResult:
    limits = limits or Limits(wall_timeout_s=300, memory_bytes=8 << 30, max_processes=512)
    started = time.monotonic()
    with private_workdir() as work:
        (work / filename).write_text(source)
        shutil.chown(work / filename, user=work.stat().st_uid, group=work.stat().st_gid)
        if harness_visible:
            stage_harness_header(work)
        for relative, text in include_first:
            path = work / _FIRST_INCLUDE / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        for path in [work / _FIRST_INCLUDE, *(work / _FIRST_INCLUDE).rglob("*")] if include_first else []:
            shutil.chown(path, user=work.stat().st_uid, group=work.stat().st_gid)
        # An object's device code as PTX beside it (what the kernels call: device malloc), the very
        # PTX this compile made (kept from its steps), not a second front-end run.
        # and ptxas's report of it (ptxas_saves_registers reads it)
        kept = ["-keep", "-keep-dir", "steps", "-Xptxas", "-v"] if object_only else []
        if object_only:
            (work / "steps").mkdir()
            shutil.chown(work / "steps", user=work.stat().st_uid, group=work.stat().st_gid)
        run = run_sandboxed([str(toolchain.nvcc), *first, *flags, *kept, *_SUPPRESSED, *includes, filename,
                             "-o", output], workdir=work, limits=limits)
        if run.ok and object_only:
            ptx = work / "steps" / f"{Path(filename).stem}.ptx"
            if not ptx.is_file():
                return BuildResult(ok=False, stage="compile", log="[compile] nvcc kept no PTX of the unit", flags=flags,
                                   key=key, seconds=time.monotonic() - started)
            shutil.copy2(ptx, work / "program.ptx")
        log = (run.stdout + run.stderr).strip()
        if object_only:
            report = "\n".join(line for line in log.splitlines() if _PTXAS_REPORT_LINE.match(line))
            (work / PTXAS_REPORT).write_text(report + "\n")
            log = "\n".join(line for line in log.splitlines() if not _PTXAS_REPORT_LINE.match(line)).strip()
        if not run.ok:
            return BuildResult(ok=False, stage="compile", log=log + f"\n[compile] nvcc {run.failure()}", flags=flags,
                               key=key, seconds=time.monotonic() - started)
        publish_build(work, outputs, out_dir)
    return BuildResult(ok=True, stage="done", log=log, binary=out_dir / output, flags=flags, key=key,
                       seconds=time.monotonic() - started)


_LINK_FUNCTION = re.compile(r"([\w.-]+\.o): in function [`']")
_LINK_PROBLEM = re.compile(r"(undefined reference|multiple definition) (?:to|of) [`'‘](.+?)['’]")


def _definition_kind(unit: str, name: str) -> str | None:
    """How `unit` defines function `name` at top level: "template", "static", "inline", "plain";
    None when it does not define it."""
    from ..program.scanner import function_name, scan_items, strip_comments

    for item in scan_items(unit):
        if item.is_function_definition and function_name(item) == name:
            head = strip_comments(item.head)
            if re.match(r"\s*template\s*<", head):
                return "template"
            if re.search(r"\bstatic\b", head):
                return "static"
            if re.search(r"\b(?:inline|__forceinline__)\b", head):
                return "inline"
            return "plain"
    return None


def explain_link_failure(log: str, editable_unit: str, harness_unit: str) -> str | None:
    """The link step's failure in one sentence that names its cause: an undefined reference to a
    function the other translation unit defines as a template, `static` or `inline` (so it has
    no visible definition there), or a function the preamble defines in both units; otherwise
    the first undefined reference or multiple definition, rather than collect2's last line."""
    caller = ""
    for line in log.splitlines():
        if m := _LINK_FUNCTION.search(line):
            caller = m.group(1)
        m = _LINK_PROBLEM.search(line)
        if m is None:
            continue
        kind, symbol = m.group(1), demangle([m.group(2)])[0]
        name = bare_name(symbol)
        if kind == "multiple definition":
            if _definition_kind(harness_unit, name) and _definition_kind(editable_unit, name):
                return (f"multiple definition of {symbol}: it is defined in code both translation units compile "
                        "(the frozen preamble, or one of your headers): give it `static inline` or move it "
                        "below the editable part")
            return f"multiple definition of {symbol}"
        harness_calls = caller.startswith("harness")
        who, where = ("the harness", "the editable part") if harness_calls else ("the editable part", "the harness")
        defined = _definition_kind(editable_unit if harness_calls else harness_unit, name)
        if defined == "template":
            return (f"{who} calls {symbol}, a template defined in {where}: instantiate it there "
                    f"(`template {symbol};`) or make it a non-template")
        if defined in ("static", "inline"):
            return (f"{who} calls {symbol}, which {where} defines `{defined}` (so the other translation unit "
                    f"cannot see it): drop `{defined}` there")
        if defined == "plain":
            return (f"{who} calls {symbol}, which {where} defines with other parameter types or in another "
                    "namespace: keep the baseline's signature")
        return f"undefined reference to {symbol}: {where} does not define it"
    return None
