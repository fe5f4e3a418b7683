"""From (match, configuration) to the complete editable part of a candidate.

The candidate keeps everything of the baseline's editable part except the launch it replaces
and the kernels only that launch used: other exported functions, includes and constants stay
as written. In the launcher, the launch's statement alone becomes a call of the template's
`kl_<family>_run` with the launch's own words as written (in the template's canonical order);
every other statement stays where it was, as written (red team rounds 100-102: a statement
left out or moved loses what its syntax does not show).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ...program.scanner import in_scope, normalized, preprocessed, strip_comments
from .cparse import identifiers
from .families import BY_NAME
from .families.base import Config, Match
from .launch_guard import attributes_helper, baseline_launch, guarded
from .launcher import EditablePart
from .syntax import Launch, to_c
from .templates import Template

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)


@dataclass(frozen=True)
class Candidate:
    match: Match
    config: Config
    template: Template
    source: str  # the complete candidate editable part
    label: str
    prefix: str = "kl_"  # of the template's identifiers in this candidate

    @property
    def fingerprint(self) -> str:
        return source_fingerprint(self.source)


def source_fingerprint(source: str) -> str:
    """Equal for sources that differ only in comments and whitespace."""
    return hashlib.sha256(normalized(source).encode()).hexdigest()


def _prefix(texts: list[str]) -> str:
    """kl_ unless the baseline already uses names starting with it; then kl0_, kl1_, ..."""
    joined = "\n".join(texts)
    for candidate in ["kl_"] + [f"kl{i}_" for i in range(10)]:
        if not re.search(rf"\b{candidate}|\b{candidate.upper()}", joined):
            return candidate
    raise ValueError("no free identifier prefix")


def _ascii(text: str) -> str | None:
    if text.isascii():
        return text
    stripped = strip_comments(text)
    return stripped if stripped.isascii() else None


# The largest size a template is handed (its int arithmetic, an index plus a grid's stride, stays
# far from overflow); beyond it the candidate launches the baseline's kernel.
TEMPLATE_SIZE_LIMIT = 1 << 30


def build(match: Match, config: Config, template: Template, part: EditablePart, editable: str,
          preamble: str, harness: str = "") -> Candidate | str:
    """The candidate, or one line saying why this configuration cannot be emitted here."""
    values = {**config.values(), **{k: v for k, v in match.placeholders.items() if not k.startswith("_")}}
    body = template.render(values)
    if match.placeholders.get("_HELPERS"):  # code the family adds beside the template (an operand's copy)
        body = f"{body.rstrip()}\n{match.placeholders['_HELPERS']}"
    body = f"{body.rstrip()}\n\n{attributes_helper()}"  # what the launch guard calls (launch_guard), renamed below
    prefix = _prefix([editable, preamble, harness])  # the harness's kernels must not be shadowed either
    if prefix != "kl_":
        body = re.sub(r"\bkl_", prefix, body)
        body = re.sub(r"\bKL_", prefix.upper(), body)
    macros = set(_DEFINE.findall(preprocessed(preamble))) | set(_DEFINE.findall(preprocessed(editable)))
    used = identifiers(body)
    clash = sorted(used & macros)
    if clash:
        return f"the preamble's macro {clash[0]} would rewrite the template {template.name}"

    lau = match.launcher
    family = BY_NAME[match.family]
    args = [match.roles[r] if r not in family.INT_ROLES else f"(int)({match.roles[r]})" for r in family.ROLES]
    # the stream the baseline launched on (a parameter of the launcher), or the default stream
    stream = to_c(match.launcher.stream) if match.launcher.stream is not None else "0"
    stream = stream if re.fullmatch(r"[\w:]+", stream) else f"({stream})"  # as written: maybe an expression
    extra = [a for a in match.placeholders.get("_EXTRA_ARGS", "").split("\n") if a]  # e.g. a GEMM's alpha, beta
    # `_fits` reads sizes only: it gets the roles as written, so a helper's work (an operand's transposed
    # copy) runs once per call, and not at all where the baseline's launch runs instead
    fits_args = [*args, *extra, stream]
    for i, r in enumerate(family.ROLES):  # a role handed over through the family's helper ({ROLE}: its text)
        if fmt := match.placeholders.get(f"_ARG_{r}"):
            args[i] = re.sub(r"\bkl_", prefix, fmt).format(**match.roles, _STREAM=stream)
    args += extra
    args.append(stream)
    if lau.in_place is None:
        return "the launch is not a statement of its own at the top of the launcher's body"
    if _ascii(lau.fn.head.rstrip()) is None:
        return "the launcher's head is not ASCII"
    run = f"{prefix}{match.family}_run({', '.join(args)});"
    # the launch's statement replaced, the rest of the body as written (its zeroing and checks among
    # it; the family's own zeroing, if any, just before the run)
    start, end = lau.in_place.span  # type: ignore[attr-defined]
    body_text = lau.fn.item.text[len(lau.fn.head):]
    own = " ".join(match.zeroing[len(lau.zeroing):])
    sizes = list(dict.fromkeys(match.roles[r] for r in family.INT_ROLES if r in match.roles))
    # The templates count in int; the baseline may count in 64 bits (`size_t n`). Beyond the
    # templates' range the baseline's own launch runs, as written (red team round 109: a 3 GB
    # histogram handed to `(int)(n)` counted nothing): right at every size, faster where it fits.
    # So it does beyond the template's own launch limits, which its `_fits` states (round 110:
    # 65535 blocks in y, passed by a 600000-row stencil), where the family's reading of the
    # baseline holds only under a condition (a grid that rounds down: round 112), and where the
    # baseline's own launch is not legal (round 116: it writes nothing; see launch_guard).
    clauses = [f"(long long)({v}) >= 1 && (long long)({v}) <= {TEMPLATE_SIZE_LIMIT}LL" for v in sizes]
    if re.search(rf"\b{prefix}{match.family}_fits\(", body):
        clauses.append(f"{prefix}{match.family}_fits({', '.join(fits_args)})")
    clauses += list(match.conditions)
    try:
        launch = lau.in_place.expr  # type: ignore[union-attr]
        evaluated = baseline_launch(body_text[start:end].strip(), prefix,
                                    parsed=[to_c(c) for c in launch.config] if isinstance(launch, Launch) else None)
    except ValueError as exc:
        return f"the kernel {exc}"
    call = guarded(evaluated, f"{own + ' ' if own else ''}{run}", clauses, prefix)
    launcher_text = _ascii(f"{lau.fn.head.rstrip()} {body_text[:start]}{call}{body_text[end:]}".rstrip())
    if launcher_text is None:
        return "the launcher is not ASCII"

    out: list[str] = []  # every kernel stays: the fallback launches the baseline's
    for item in part.items:
        if item is lau.fn.item:  # inside the launcher's namespace, where it was
            out.append(in_scope(item, f"// kernelloop offline optimizer: {config.label} (template {template.name})\n"
                                      f"// recognized: {match.detail}\n{body.rstrip()}\n\n{launcher_text}"))
            continue
        text = _ascii(in_scope(item))
        if text is None:
            return "the baseline's editable part has non-ASCII code"
        out.append(text)
    source = "\n\n".join(out) + "\n"
    if not source.isascii():
        return "the candidate is not ASCII"
    return Candidate(match=match, config=config, template=template, source=source, label=config.label, prefix=prefix)
