"""The messages an LLM optimizer sends: prompt files with `{slot}`s, filled from the request.

The wording lives in `prompts/` (see prompts/README.md), not here; this module only fills the
slots. Everything inserted is bounded (long sources, excerpts and notes are cut with a visible
`[kernelloop: ...]` marker) and spelled in ASCII, so a prompt for a bundled kernel stays under
:data:`PROMPT_BUDGET_CHARS` characters however many notes and failed attempts there are. The
same request always gives the same messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, EnvironmentProblem
from ..package_files import package_path
from ..profiler.diagnosis import Diagnosis, Evidence
from .base import FailedAttempt, Message, OptimizeRequest, PastAttempt, ResearchNote
from .cleaning import parse_signature, required_exports, to_ascii

PROMPTS_DIR = package_path("prompts")
EXEMPLAR_PATH = package_path("exemplars", "matmul_smem_tiling.cu")
PROMPT_FILES = ("system.md", "user.md", "anti_context.md", "attempt.md", "compile_fix.md")
PROMPT_BUDGET_CHARS = 24_000  # system + user message, in characters

_SLOT = re.compile(r"\{\{|\}\}|\{([a-z][a-z0-9_]*)\}")


@dataclass(frozen=True)
class Caps:
    """How much of each part goes into a prompt (characters unless said otherwise)."""

    source: int = 16_000  # current editable part, compile-fix candidate
    preamble: int = 3_000
    harness: int = 2_500
    findings: int = 4  # diagnosis findings, most severe first
    research_notes: int = 6  # notes
    research_note: int = 1_800
    research_total: int = 6_000
    exemplar: bool = True
    memory_items: int = 8
    memory_total: int = 1_500
    attempts: int = 5  # the most recent failed attempts shown (at least 1)
    attempt_reason: int = 300
    attempt_excerpt: int = 900
    attempt_source_head: int = 1_200  # start of the latest failed candidate
    compile_errors: int = 3_000


# Tried in order until the prompt fits the budget.
CAPS_LEVELS = (
    Caps(),
    Caps(research_notes=4, research_note=1_000, research_total=3_000, memory_items=5, memory_total=900, attempts=3,
         attempt_excerpt=600, attempt_source_head=600, compile_errors=2_000, findings=3),
    Caps(preamble=1_500, harness=1_200, research_notes=2, research_note=600, research_total=1_200, exemplar=False,
         memory_items=3, memory_total=500, attempts=2, attempt_reason=200, attempt_excerpt=400, attempt_source_head=0,
         compile_errors=1_500, findings=2),
    Caps(preamble=1_200, harness=800, research_notes=0, exemplar=False, memory_items=0, attempts=1,
         attempt_reason=200, attempt_excerpt=300, attempt_source_head=0, compile_errors=1_000, findings=1),
)


def build_messages(request: OptimizeRequest, prompts_dir: Path | None = None, *,
                   exemplar: Path | None = None) -> list[Message]:
    """System and user messages for `request`.

    The user message holds the task; an anti-context section follows when the request has
    failed attempts, and a compile-fix section when it carries nvcc's errors. `prompts_dir`
    defaults to the repository's prompts/ and `exemplar` to exemplars/matmul_smem_tiling.cu."""
    templates = load_prompts(prompts_dir)
    exemplar_text = _read_exemplar(exemplar or EXEMPLAR_PATH)
    messages: list[Message] = []
    for caps in CAPS_LEVELS:
        messages = _build(request, templates, exemplar_text, caps)
        if sum(len(m.content) for m in messages) <= PROMPT_BUDGET_CHARS:
            break
    return messages


def load_prompts(prompts_dir: Path | None = None) -> dict[str, str]:
    """Every prompt file's text, by file name. A missing file is a one-line error."""
    folder = Path(prompts_dir) if prompts_dir is not None else PROMPTS_DIR
    out: dict[str, str] = {}
    for name in PROMPT_FILES:
        path = folder / name
        try:
            out[name] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problem = f"prompt file {path} cannot be read ({type(exc).__name__})"
            if prompts_dir is not None:
                raise ConfigError(problem) from None
            raise EnvironmentProblem(f"{problem}: kernelloop's prompts/ folder is incomplete") from None
    return out


def template_slots(template: str) -> list[str]:
    """The slot names a template uses, in order of first use."""
    seen: list[str] = []
    for m in _SLOT.finditer(template):
        if m.group(1) and m.group(1) not in seen:
            seen.append(m.group(1))
    return seen


def render(template: str, values: dict[str, str], where: str = "prompt") -> str:
    """Fill `{slot}`s in one pass (inserted text is never scanned again); `{{`/`}}` are braces.

    A slot the caller does not provide is an error naming the file, so an edited prompt file
    cannot silently send a literal `{slot}` to the model."""

    def fill(m: re.Match[str]) -> str:
        if m.group(0) == "{{":
            return "{"
        if m.group(0) == "}}":
            return "}"
        name = m.group(1)
        if name not in values:
            raise ConfigError(f"{where}: unknown slot {{{name}}} (known: {', '.join(sorted(values))})")
        return values[name]

    return _SLOT.sub(fill, template)


# -- sections ------------------------------------------------------------------------------


def _build(request: OptimizeRequest, templates: dict[str, str], exemplar: str, caps: Caps) -> list[Message]:
    system = render(templates["system.md"], {}, "prompts/system.md")
    sections = [render(templates["user.md"], _user_values(request, exemplar, caps), "prompts/user.md")]
    if request.failed_attempts:
        attempts = request.failed_attempts[-max(1, caps.attempts):]
        rendered = [_render_attempt(templates["attempt.md"], a, caps, latest=(k == len(attempts) - 1))
                    for k, a in enumerate(attempts)]
        skipped = len(request.failed_attempts) - len(attempts)
        if skipped:
            rendered.insert(0, f"[kernelloop: {skipped} older attempt(s) not shown]")
        sections.append(render(templates["anti_context.md"], {
            "attempts": "\n\n".join(r.strip("\n") for r in rendered),
            "best_speedup": f"{request.best_speedup:.2f}",
            "threshold": f"{request.threshold:g}",
        }, "prompts/anti_context.md"))
    if request.compile_errors:
        sections.append(render(templates["compile_fix.md"], {
            "compile_errors": _fenced(_cut(request.compile_errors.strip("\n"), caps.compile_errors, "error lines")),
            "previous_source": _fenced(_cut((request.previous_source or "").strip("\n"), caps.source, "source")),
        }, "prompts/compile_fix.md"))
    user = "\n\n".join(s.strip("\n") for s in sections) + "\n"
    return [Message(role="system", content=system.strip("\n") + "\n"), Message(role="user", content=user)]


def _user_values(request: OptimizeRequest, exemplar: str, caps: Caps) -> dict[str, str]:
    current_is_baseline = request.current_editable.strip() == request.baseline_editable.strip()
    if current_is_baseline:
        label, progress = "the baseline", "The code below is the baseline."
    else:
        label = f"the best accepted candidate so far ({request.best_speedup:.2f}x over the baseline)"
        progress = (f"The code below is the best accepted candidate so far, {request.best_speedup:.2f}x faster "
                    "than the original baseline.")
    required = required_exports(request)
    return {
        "kernel_name": to_ascii(request.kernel_name),
        "gpu": to_ascii(request.gpu_name) or "an NVIDIA GPU",
        "arch": to_ascii(request.arch),
        "iteration": str(request.iteration),
        "threshold": f"{request.threshold:g}",
        "progress": progress,
        "current_label": label,
        "required_functions": "\n".join(f"- `{' '.join(to_ascii(d).split())}`" for d in required)
        or "- (none listed: keep every non-static function of the current editable part)",
        "preamble": _fenced(_cut(request.preamble.strip("\n"), caps.preamble, "preamble")) or "// (empty)",
        "current_editable": _fenced(_cut(request.current_editable.strip("\n"), caps.source, "source")),
        "harness_excerpt": _fenced(harness_excerpt(request.harness, required, caps.harness)),
        "diagnosis": render_diagnosis(request.diagnosis, caps.findings),
        "research": render_research(request.research, caps),
        "exemplar": _fenced(exemplar) if caps.exemplar and exemplar else
        "// (left out to keep the prompt short: answer with the kernels and the launcher only)",
        "memory": render_memory(request.memory, caps),
    }


def harness_excerpt(harness: str, required: list[str], limit: int, context: int = 3) -> str:
    """The harness lines that call the exported functions, with `context` lines around each."""
    lines = harness.splitlines()
    names = [sig.name for sig in map(parse_signature, required) if sig]
    hits = [k for k, line in enumerate(lines)
            if any(re.search(rf"\b{re.escape(n)}\s*(?:\(|<<<)", line) for n in names)]
    if not hits:
        return _cut(harness.strip("\n"), limit, "harness") if harness.strip() else "// (no harness given)"
    ranges: list[list[int]] = []
    for k in hits:
        lo, hi = max(0, k - context), min(len(lines) - 1, k + context)
        if ranges and lo <= ranges[-1][1] + 1:
            ranges[-1][1] = max(ranges[-1][1], hi)
        else:
            ranges.append([lo, hi])
    parts = []
    for lo, hi in ranges:
        parts.append(f"// [kernelloop: harness lines {lo + 1}-{hi + 1}]\n" + "\n".join(lines[lo : hi + 1]))
    return _cut(to_ascii("\n".join(parts)), limit, "harness excerpt")


def render_diagnosis(diagnosis: Diagnosis | None, max_findings: int) -> str:
    if diagnosis is None:
        return "No profile is available for this kernel: reason from the code."
    d = diagnosis
    out = [to_ascii(d.summary).strip()]
    shape = []
    if d.duration_ms is not None:
        shape.append(f"{d.duration_ms:.4g} ms per launch")
    if d.grid:
        shape.append(f"grid ({', '.join(map(str, d.grid))})")
    if d.block:
        shape.append(f"block ({', '.join(map(str, d.block))})")
    out.append(f"- Profiled kernel `{to_ascii(d.kernel)}`" + (f" on {to_ascii(d.device)}" if d.device else "")
               + (": " + ", ".join(shape) if shape else "") + f". Class: {d.primary}; main problem: "
               + to_ascii(d.subtype) + ".")
    metrics = [f"{to_ascii(e.label)} {_value(e)}" for e in d.key_metrics if e.value is not None]
    if metrics:
        out.append("- Key metrics: " + "; ".join(metrics) + ".")
    r = d.roofline
    if r.arithmetic_intensity is not None:
        roof = f"- Roofline: {r.arithmetic_intensity:.3g} FP32 FLOP per DRAM byte"
        if r.ridge_point is not None:
            roof += f" (ridge point {r.ridge_point:.3g}, {r.side}-side)"
        if r.pct_of_compute_roof is not None and r.pct_of_memory_roof is not None:
            roof += f"; {r.pct_of_compute_roof:.1f}% of the compute roof, {r.pct_of_memory_roof:.1f}% of the memory roof"
        out.append(roof + ".")
    if d.findings:
        out.append("Findings, most severe first:")
        for k, f in enumerate(d.findings[:max_findings], 1):
            agree = f" (NVIDIA's rules agree: {', '.join(f.nvidia_agrees)})" if f.nvidia_agrees else ""
            line = f"{k}. [{f.severity}] {f.title}: {f.finding} Fix: {f.action}{agree}"
            out.append(_cut_line(to_ascii(" ".join(line.split())), 600))
        if len(d.findings) > max_findings:
            out.append(f"[kernelloop: {len(d.findings) - max_findings} less severe finding(s) not shown]")
    return "\n".join(out)


def _value(e: Evidence) -> str:
    v = e.value
    assert v is not None
    unit = to_ascii(e.unit)
    if unit == "%":
        return f"{v:.1f}%"
    if unit.startswith("%"):
        return f"{v:.1f}{unit}"
    number = f"{int(v)}" if float(v).is_integer() and abs(v) < 1e6 else f"{v:.3g}"
    return f"{number} {unit}".strip()


def render_research(notes: list[ResearchNote], caps: Caps) -> str:
    if not notes:
        return "No notes were found for this diagnosis."
    out, used = [], 0
    shown = notes[: caps.research_notes]
    for note in shown:
        text = _cut(to_ascii(note.text.strip()), caps.research_note, "note")
        block = f"### {to_ascii(note.title).strip()} ({to_ascii(note.source).strip()})\n{text}"
        if used + len(block) > caps.research_total:
            room = caps.research_total - used
            if room < 300:
                break
            block = _cut(block, room, "note")
        out.append(block)
        used += len(block)
    left = len(notes) - len(out)
    if left:
        out.append(f"[kernelloop: {left} more note(s) not shown]")
    return "\n\n".join(out)


def render_memory(memory: list[PastAttempt], caps: Caps) -> str:
    if not memory:
        return "No earlier runs of this kernel."
    if caps.memory_items <= 0:
        return f"[kernelloop: {len(memory)} earlier attempt(s) not shown]"
    lines = []
    for past in memory[-caps.memory_items:]:
        verdict = "accepted" if past.accepted else "rejected"
        speed = f", {past.speedup:.2f}x" if past.speedup is not None else ""
        reason = f": {to_ascii(past.reason)}" if past.reason and not past.accepted else ""
        lines.append(_cut_line(" ".join(f"- run {to_ascii(past.run_id)}: {to_ascii(past.approach)} -> {verdict}"
                                        f"{speed}{reason}".split()), 240))
    text = "\n".join(lines)
    if len(memory) > caps.memory_items:
        text = f"[kernelloop: {len(memory) - caps.memory_items} older attempt(s) not shown]\n" + text
    return _cut(text, caps.memory_total, "memory")


_VERDICTS = {
    "compile": ("did not compile", "nvcc errors"),
    "policy": ("broke a rule (policy gate)", "violations"),
    "correctness": ("wrong results", "first mismatching values"),
    "not_faster": ("correct, but not fast enough", "measurement"),
    "timing": ("failed the timing checks", "timing details"),
    "run_failed": ("crashed or failed at run time", "end of its output"),
    "memcheck": ("memory errors (compute-sanitizer)", "sanitizer report"),
    "invalid_response": ("the answer could not be used", "details"),
    "other": ("rejected", "details"),
}


def _render_attempt(template: str, attempt: FailedAttempt, caps: Caps, *, latest: bool) -> str:
    verdict, excerpt_label = _VERDICTS.get(attempt.kind, _VERDICTS["other"])
    details: list[str] = []
    if attempt.speedup is not None:
        details.append(f"Measured speedup over the baseline: {attempt.speedup:.2f}x.")
    if attempt.excerpt.strip():
        excerpt = _cut(to_ascii(attempt.excerpt.strip("\n")), caps.attempt_excerpt, "excerpt")
        details.append(f"{excerpt_label.capitalize()}:\n```text\n{_fenced(excerpt)}\n```")
    if latest and caps.attempt_source_head and attempt.source.strip():
        head = _cut(to_ascii(attempt.source.strip("\n")), caps.attempt_source_head, "candidate")
        details.append(f"Start of that candidate:\n```cuda\n{_fenced(head)}\n```")
    return render(template, {
        "iteration": str(attempt.iteration),
        "approach": _cut_line(to_ascii(" ".join(attempt.approach.split())) or "(unnamed)", 160),
        "verdict": verdict,
        "reason": _cut_line(to_ascii(" ".join(attempt.reason.split())), caps.attempt_reason),
        "details": "\n".join(details),
    }, "prompts/attempt.md")


# -- text helpers --------------------------------------------------------------------------


def _read_exemplar(path: Path) -> str:
    try:
        return to_ascii(path.read_text(encoding="utf-8")).strip("\n")
    except (OSError, UnicodeDecodeError):
        return ""


def _cut(text: str, limit: int, what: str) -> str:
    """`text` cut to about `limit` characters at a line break, with a visible marker."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    if "\n" in head[limit // 2 :]:
        head = head[: head.rfind("\n")]
    return f"{head}\n[kernelloop: {len(text) - len(head)} more characters of this {what} not shown]"


def _cut_line(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 30].rstrip() + " [kernelloop: cut]"


def _fenced(text: str) -> str:
    """Text to go inside a ``` fence: ASCII, and no fence of its own to close ours early."""
    return to_ascii(text).replace("```", "'''")

