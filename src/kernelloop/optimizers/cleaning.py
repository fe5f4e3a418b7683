"""From an LLM's answer to one candidate editable part, or a one-line reason why not.

The answer should be one line `Approach: ...` and exactly one ```cuda block with the complete
editable part. Models add prose, reasoning (`<think>` blocks), several code blocks, elisions
("// ... rest unchanged"), typographic characters, or change the launcher's signature.
:func:`clean_response` takes the code, fixes what is harmless (prose around it, non-ASCII
characters inside comments) and rejects the rest with :class:`InvalidResponse`, whose message
is one line that goes back to the model as anti-context.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from ..program.scanner import function_name, scan_items, split_top_level, strip_comments
from ..program.split import BEGIN_MARKER, END_MARKER
from .base import InvalidResponse, OptimizeRequest

# -- ASCII ---------------------------------------------------------------------------------

# Typographic characters models and our own notes use, with their usual ASCII spelling.
_ASCII_SPELLING = {
    "\u2014": "--", "\u2013": "-", "\u2012": "-", "\u2010": "-", "\u2011": "-", "\u2212": "-",
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2033": '"', "\u00ab": '"', "\u00bb": '"',
    "\u2026": "...", "\u00d7": "x", "\u22c5": "*", "\u00b7": "*", "\u2022": "*", "\u00f7": "/",
    "\u2264": "<=", "\u2265": ">=", "\u2260": "!=", "\u2248": "~", "\u223c": "~", "\u00b1": "+/-",
    "\u2192": "->", "\u2190": "<-", "\u21d2": "=>", "\u2194": "<->", "\u00b5": "u", "\u03bc": "u",
    "\u00b2": "^2", "\u00b3": "^3", "\u221e": "inf", "\u2211": "sum", "\u221a": "sqrt",
    "\u00a0": " ", "\u2009": " ", "\u202f": " ", "\u2002": " ", "\u2003": " ", "\u200b": "",
    "\ufeff": "", "\u2713": "ok", "\u2717": "x", "\u00b0": " deg",
}


def to_ascii(text: str) -> str:
    """`text` with every non-ASCII character spelled in ASCII (or '?' when it has no spelling)."""
    if text.isascii():
        return text
    out: list[str] = []
    for ch in text:
        if ch.isascii():
            out.append(ch)
        elif ch in _ASCII_SPELLING:
            out.append(_ASCII_SPELLING[ch])
        else:
            # Accented letters keep their base letter (e -> e); anything else becomes '?'.
            base = "".join(c for c in unicodedata.normalize("NFKD", ch) if c.isascii() and c.isprintable())
            out.append(base or "?")
    return "".join(out)


def _describe_char(ch: str) -> str:
    name = unicodedata.name(ch, "")
    return f"U+{ord(ch):04X}" + (f" ({name})" if name else "")


# -- a small lexer: comments and code, strings skipped -------------------------------------


@dataclass(frozen=True)
class _Comment:
    start: int
    end: int
    text: str  # without the delimiters
    own_line: bool  # nothing but whitespace before it on its line


def _lex(source: str) -> tuple[list[_Comment], str]:
    """The comments of `source`, and its code with comments and literals blanked out.

    The blanked code keeps every offset and newline, so a position in it is a position in
    `source`."""
    comments: list[_Comment] = []
    code = list(source)
    i, n = 0, len(source)
    while i < n:
        if source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
            while j < n and source[j - 1] == "\\":  # a line splice continues the comment
                k = source.find("\n", j + 1)
                j = n if k < 0 else k
            comments.append(_Comment(i, j, source[i + 2 : j], _own_line(source, i)))
            _blank(code, i, j)
            i = j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            end = n if j < 0 else j + 2
            comments.append(_Comment(i, end, source[i + 2 : (n if j < 0 else j)], _own_line(source, i)))
            _blank(code, i, end)
            i = end
        elif source[i] in "\"'":
            end = _literal_end(source, i)
            _blank(code, i + 1, max(i + 1, end - 1))
            i = end
        else:
            i += 1
    return comments, "".join(code)


def _own_line(source: str, offset: int) -> bool:
    line_start = source.rfind("\n", 0, offset) + 1
    return not source[line_start:offset].strip()


def _blank(chars: list[str], start: int, end: int) -> None:
    for k in range(start, end):
        if chars[k] != "\n":
            chars[k] = " "


def _literal_end(source: str, i: int) -> int:
    quote, j = source[i], i + 1
    while j < len(source):
        if source[j] == "\\":
            j += 2
            continue
        if source[j] == quote or source[j] == "\n":
            return j + 1
        j += 1
    return j


def _line_of(source: str, offset: int) -> int:
    return source.count("\n", 0, offset) + 1


# -- elisions ------------------------------------------------------------------------------

# Phrases that, inside any comment, stand in for code that was not written out.
_ELISION_PHRASES = re.compile(
    r"\bsame as (?:before|above|the original|original|in the original|the baseline|baseline|previous(?:ly)?"
    r"|the previous(?: version| code| kernel| answer)?|the current(?: version| code)?|your code)\b"
    r"|\bexisting (?:code|implementation|kernels?|functions?|launcher|logic|helpers?)\b"
    r"|\b(?:code|body|implementation|details?|helpers?|kernels?) (?:omitted|elided|not shown|left out|skipped)\b"
    r"|\b(?:omitted|elided) (?:for brevity|here|for clarity)\b|\bfor brevity\b"
    r"|\b(?:insert|put|add) (?:the |your )?(?:code|implementation) here\b|\byour (?:code|implementation) here\b"
    r"|\b(?:the )?rest (?:is |remains |stays )?(?:unchanged|the same|as before|as above|identical)\b",
    re.IGNORECASE,
)
# Phrases that count only in a short comment ("// launcher unchanged", "// rest of the kernel"):
# in a sentence explaining a design ("the rest of the loop reads shared memory") they are prose.
_SHORT_ELISION_PHRASES = re.compile(
    r"\brest of (?:the |this |your )?\w+|\b(?:unchanged|unmodified|not changed|no changes?)\b|\bas before\b"
    r"|\bsame as\b|\bidentical to\b|\bas in the (?:original|baseline)\b",
    re.IGNORECASE,
)
_SHORT_COMMENT_WORDS = 8
# Words that, next to an ellipsis in a comment, mark it as an elision ("// ... other kernels").
_ELISION_WORDS = re.compile(
    r"\b(?:rest|unchanged|same|existing|previous|omitted|elided|other|others|remaining|more|etc|original|as before"
    r"|code|kernels?|functions?|helpers?|launcher|implementation|body|here)\b",
    re.IGNORECASE,
)
_ELLIPSIS = re.compile(r"\.\.\.|\u2026")


def _elision_in_comment(comment: _Comment) -> str | None:
    """Why this comment reads as an elision, or None.

    An ellipsis in a comment is ordinary in math ("k = 0 ... K-1") and quotes; it counts only
    when the comment is nothing but the ellipsis, or a short comment that starts or ends with
    it and names what was left out ("// ... other kernels"). "unchanged" or "rest of"
    count in a short comment ("// launcher unchanged"), not in a sentence explaining a design."""
    text = comment.text.strip().strip("*/!<").strip()
    phrase = _ELISION_PHRASES.search(text)
    if phrase:
        return f"'{phrase.group(0)}'"
    if _ELLIPSIS.search(text):
        rest = _ELLIPSIS.sub(" ", text).strip(" \t()[]{}:;,.-")
        at_edge = bool(re.match(r"^\W*(?:\.\.\.|\u2026)|(?:\.\.\.|\u2026)\W*$", text))
        words = re.findall(r"[A-Za-z_]+", rest)
        if not rest or (at_edge and len(words) <= _SHORT_COMMENT_WORDS and _ELISION_WORDS.search(rest)):
            return "'...'"
    short = _SHORT_ELISION_PHRASES.search(text)
    if short and len(re.findall(r"[A-Za-z0-9_]+", text)) <= _SHORT_COMMENT_WORDS:
        return f"'{short.group(0)}'"
    return None


# An ellipsis that stands where code should be: alone on a line, or as a whole body `{ ... }`.
# Varargs (`int f(int, ...)`), parameter packs (`Ts...`, `args...`) and folds stay legal.
_CODE_ELISION = re.compile(r"^[ \t]*(?:\.\.\.|\u2026)[ \t;]*$|\{[ \t\n]*(?:\.\.\.|\u2026)[ \t\n;]*\}", re.MULTILINE)


def find_elision(code: str) -> str | None:
    """One line naming the first elision in `code`, or None."""
    comments, blanked = _lex(code)
    found: list[tuple[int, str]] = []
    for comment in comments:
        why = _elision_in_comment(comment)
        if why:
            found.append((comment.start, f"the comment {why} on line {_line_of(code, comment.start)}"))
            break
    m = _CODE_ELISION.search(blanked)
    if m:
        found.append((m.start(), f"'...' in place of code on line {_line_of(code, m.start())}"))
    if not found:
        return None
    _, where = min(found)
    return (f"the code is elided ({where}): write out the complete editable part, every line of every kernel "
            "and the launcher, with no placeholders and no comments saying code is unchanged or omitted")


# -- non-ASCII -----------------------------------------------------------------------------


def fix_comment_ascii(code: str) -> tuple[str, int, tuple[int, str] | None]:
    """Spell non-ASCII characters inside comments in ASCII (they cannot change what compiles).

    Returns the new code, how many characters were replaced, and the first non-ASCII
    character outside comments as (line, description), or None."""
    if code.isascii():
        return code, 0, None
    comments, _ = _lex(code)
    inside = [(c.start, c.end) for c in comments]
    out: list[str] = []
    replaced, outside = 0, None
    ci = 0
    for offset, ch in enumerate(code):
        while ci < len(inside) and inside[ci][1] <= offset:
            ci += 1
        in_comment = ci < len(inside) and inside[ci][0] <= offset < inside[ci][1]
        if ch.isascii():
            out.append(ch)
        elif in_comment:
            out.append(to_ascii(ch))
            replaced += 1
        else:
            if outside is None:
                outside = (_line_of(code, offset), _describe_char(ch))
            out.append(ch)
    return "".join(out), replaced, outside


# -- signatures ----------------------------------------------------------------------------

_TYPE_WORDS = {"void", "bool", "char", "short", "int", "long", "float", "double", "signed", "unsigned",
               "wchar_t", "char16_t", "char32_t", "auto"}
_CV = {"const", "volatile"}
_DROPPED_PARAM_WORDS = {"__restrict__", "__restrict", "restrict", "register"}
# Words before the name that do not change what the harness links against.
_DROPPED_HEAD_WORDS = {"inline", "__inline__", "__forceinline__", "__noinline__", "__host__", "constexpr"}


@dataclass(frozen=True)
class Signature:
    name: str
    prefix: tuple[str, ...]  # return type and qualifiers that matter (__global__, static, extern "C")
    params: tuple[str, ...]  # parameter types, names and top-level qualifiers removed
    template: bool = False

    def render(self) -> str:
        return f"{' '.join(self.prefix)} {self.name}({', '.join(self.params)})".strip()


def _tokens(text: str) -> list[str]:
    return re.findall(r'"[^"]*"|::|&&|[A-Za-z_]\w*|\d\w*|[*&<>,\[\]()]', text)


def _normalize_param(param: str) -> str:
    text = (split_top_level(param, "=") or [""])[0]  # default value
    toks = [t for t in _tokens(text) if t not in _DROPPED_PARAM_WORDS]
    # `float a[]` / `float a[16]` is `float* a` to the linker
    array = "[" in toks
    if array:
        toks = toks[: toks.index("[")]
    if not toks:
        return ""
    # Drop the parameter's name: a trailing identifier after something that names a type.
    type_toks = [t for t in toks[:-1] if t not in _CV]
    last = toks[-1]
    if (re.match(r"^[A-Za-z_]\w*$", last) and last not in _TYPE_WORDS and last not in _CV and type_toks
            and toks[-2] != "::"):
        toks = toks[:-1]
    if array:
        toks.append("*")
    # Top-level const/volatile do not change the function's type.
    if "*" in toks or "&" in toks:
        last_ptr = max(i for i, t in enumerate(toks) if t in ("*", "&"))
        toks = toks[: last_ptr + 1] + [t for t in toks[last_ptr + 1 :] if t not in _CV]
    else:
        toks = [t for t in toks if t not in _CV]
    # `float const*` == `const float*`: qualifiers of the pointee written first
    first_ptr = next((i for i, t in enumerate(toks) if t in ("*", "&")), len(toks))
    pointee = toks[:first_ptr]
    cv = [t for t in ("const", "volatile") if t in pointee]
    toks = cv + [t for t in pointee if t not in _CV] + toks[first_ptr:]
    if toks == ["unsigned"]:
        toks = ["unsigned", "int"]
    text = " ".join(toks)
    text = re.sub(r"\s*([*&])\s*", r"\1", text).replace(" :: ", "::")
    return text.replace(" ,", ",").replace("< ", "<").replace(" >", ">")


def parse_signature(head: str) -> Signature | None:
    """The signature of a function declaration or definition head (text before the body)."""
    text = strip_comments(head).strip().rstrip(";").strip()
    close = text.rfind(")")
    if close < 0:
        return None
    depth = 0
    for open_ in range(close, -1, -1):
        if text[open_] == ")":
            depth += 1
        elif text[open_] == "(":
            depth -= 1
            if depth == 0:
                break
    else:
        return None
    before = text[:open_].rstrip()
    m = re.search(r"([A-Za-z_]\w*)\s*$", before)
    if not m:
        return None
    name = m.group(1)
    head_text = before[: m.start()]
    template = bool(re.match(r"^\s*template\s*<", head_text))
    head_text = re.sub(r"^\s*template\s*<.*?>\s*", "", head_text, flags=re.S) if template else head_text
    head_text = re.sub(r"__launch_bounds__\s*\([^()]*\)", " ", head_text)
    head_text = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", head_text)
    prefix = tuple(t for t in _tokens(head_text) if t not in _DROPPED_HEAD_WORDS)
    params_text = text[open_ + 1 : close].strip()
    params = [] if params_text in ("", "void") else [_normalize_param(p) for p in split_top_level(params_text)]
    return Signature(name=name, prefix=_join_pointer_tokens(prefix), params=tuple(params), template=template)


def _join_pointer_tokens(tokens: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for t in tokens:
        if t in ("*", "&") and out:
            out[-1] += t
        else:
            out.append(t)
    return tuple(out)


def required_exports(request: OptimizeRequest) -> list[str]:
    """The declarations in `request.exported` that the frozen harness really calls.

    The baseline's other kernels (exported too, since they are not static) may be renamed or
    replaced: the harness never names them. Without a harness, the host functions (launchers)."""
    exported = [d for d in request.exported if d.strip()]
    if request.harness.strip():
        harness = strip_comments(request.harness)
        used = []
        for decl in exported:
            sig = parse_signature(decl)
            if sig and re.search(rf"\b{re.escape(sig.name)}\b", harness):
                used.append(decl)
        if used:
            return used
    launchers = [d for d in exported if "__global__" not in d]
    return launchers or exported


def check_exports(code: str, request: OptimizeRequest) -> str | None:
    """One line naming the first function the harness calls that the code lost or changed."""
    defined: dict[str, list[Signature]] = {}
    for item in scan_items(code):
        if item.is_function_definition:
            sig = parse_signature(item.head)
            if sig:
                defined.setdefault(sig.name, []).append(sig)
    for decl in required_exports(request):
        want = parse_signature(decl)
        if want is None:
            continue
        have = defined.get(want.name, [])
        if not have:
            return (f"the answer does not define {want.name} at file scope; the frozen harness calls "
                    f"`{' '.join(decl.split())}`: define it with exactly this signature")
        if want.template or any(s.template for s in have):
            continue  # template arguments are not worth a parser here; the link step checks them
        if any(s.params == want.params and s.prefix == want.prefix for s in have):
            continue
        sig = have[0]
        if "static" in sig.prefix and "static" not in want.prefix:
            return f"{want.name} must not be static: the frozen harness links against it"
        return (f"the signature of {want.name} changed: the harness calls `{want.render()}` "
                f"but the answer defines `{sig.render()}`; keep the exact name, return type and parameter types")
    return None


# -- code blocks ---------------------------------------------------------------------------

_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([^\n`]*)$", re.MULTILINE)
_CODE_LANGS = {"", "cuda", "cu", "cuh", "cpp", "c++", "cxx", "cc", "c", "h", "hpp", "objective-c", "nvcc"}
_DIFF_LANGS = {"diff", "patch", "udiff"}
_CODE_START = re.compile(
    r"^\s*(?:#\s*(?:include|define|pragma|if|ifdef|ifndef)\b|//|/\*|__global__|__device__|__host__|__constant__"
    r"|template\s*<|static\b|constexpr\b|const\b|void\b|struct\b|namespace\b|typedef\b|using\b|extern\b|inline\b)"
)


@dataclass(frozen=True)
class _Block:
    lang: str
    code: str
    start_line: int
    closed: bool


def _code_blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    pos = 0
    while True:
        m = _FENCE.search(text, pos)
        if not m:
            return blocks
        fence, info = m.group(1), m.group(2).strip()
        lang = info.split()[0].lower().strip("{}.") if info else ""
        body_start = m.end() + 1
        close = re.compile(rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        c = close.search(text, body_start)
        if c is None:
            blocks.append(_Block(lang, text[body_start:], _line_of(text, m.start()), closed=False))
            return blocks
        blocks.append(_Block(lang, text[body_start : c.start()], _line_of(text, m.start()), closed=True))
        pos = c.end()


def strip_reasoning(text: str) -> tuple[str, list[str]]:
    """`text` without <think>...</think> blocks (also one whose opening tag was left out)."""
    notes: list[str] = []
    stripped, count = _THINK_BLOCK.subn("", text)
    if count:
        notes.append(f"removed {count} reasoning block(s) (<think>)")
    # Some reasoning models send only the closing tag: everything before it is reasoning.
    lowered = stripped.lower()
    for tag in ("</think>", "</thinking>", "</reasoning>"):
        idx = lowered.rfind(tag)
        if idx >= 0:
            stripped = stripped[idx + len(tag) :]
            notes.append("removed reasoning ending in an unopened " + tag)
            break
    return stripped, notes


def _defines_name(code: str, name: str) -> bool:
    return any(item.is_function_definition and function_name(item) == name for item in scan_items(code))


def clean_response(text: str, request: OptimizeRequest, *, fix_comment_unicode: bool = True) -> tuple[str, list[str]]:
    """The candidate editable part in an LLM's answer, and notes on what was removed or fixed.

    Raises InvalidResponse with a one-line reason (shown to the model as anti-context) when the
    answer holds no usable code. Non-ASCII characters inside comments are spelled in ASCII
    (noted) unless `fix_comment_unicode` is False; elsewhere they are rejected."""
    notes: list[str] = []
    if not text or not text.strip():
        raise InvalidResponse("the answer is empty: return one ```cuda block with the complete editable part")
    body, think_notes = strip_reasoning(text)
    notes += think_notes
    if re.search(r"<(think|thinking|reasoning)>", body, re.IGNORECASE):
        raise InvalidResponse("the answer ended inside its reasoning (an unclosed <think> block) and holds no code; "
                              "think less and return one ```cuda block with the complete editable part")
    if not body.strip():
        raise InvalidResponse("the answer holds only reasoning and no code: return one ```cuda block with the "
                              "complete editable part")

    code = _pick_code(body, request, notes)
    code = code.strip("\n")
    if not code.strip():
        raise InvalidResponse("the ```cuda code block is empty: return the complete editable part in it")

    # A whole program with the markers: the part between them is the candidate.
    begins, ends = list(BEGIN_MARKER.finditer(code)), list(END_MARKER.finditer(code))
    if len(begins) == 1 and len(ends) == 1 and begins[0].end() < ends[0].start():
        code = code[begins[0].end() : ends[0].start()].strip("\n")
        notes.append("kept only the part between the editable markers")
        if not code.strip():
            raise InvalidResponse("the part between the editable markers is empty: return the complete editable part")

    elision = find_elision(code)
    if elision:
        raise InvalidResponse(elision)

    if fix_comment_unicode:
        code, replaced, outside = fix_comment_ascii(code)
        if replaced:
            notes.append(f"spelled {replaced} non-ASCII character(s) inside comments in ASCII")
    else:
        outside = next(((_line_of(code, i), _describe_char(ch)) for i, ch in enumerate(code) if not ch.isascii()), None)
    if outside:
        line, what = outside
        raise InvalidResponse(f"non-ASCII character {what} on line {line} of the code: use ASCII only, "
                              "in code, strings and comments")

    problem = check_exports(code, request)
    if problem:
        raise InvalidResponse(problem)
    return code + "\n", notes


def _pick_code(body: str, request: OptimizeRequest, notes: list[str]) -> str:
    """The one code block to use: the only one, or the largest that defines the launcher."""
    blocks = _code_blocks(body)
    unclosed = [b for b in blocks if not b.closed]
    code_blocks = [b for b in blocks if b.lang in _CODE_LANGS and b.code.strip()]
    if unclosed and (not code_blocks or code_blocks[-1] is unclosed[-1]):
        raise InvalidResponse("the answer was cut off: its code block is never closed (the model's output limit "
                              "was probably reached); return a shorter, complete editable part in one ```cuda block")
    if not code_blocks:
        if any(b.lang in _CODE_LANGS for b in blocks):
            raise InvalidResponse("the ```cuda code block is empty: return the complete editable part in it")
        if any(b.lang in _DIFF_LANGS for b in blocks):
            raise InvalidResponse("the answer is a diff: return the complete editable part in one ```cuda block, "
                                  "not a patch")
        if not blocks and _CODE_START.match(body) and "__global__" in body:
            notes.append("the answer had no code fence; all of it was taken as code")
            return body
        if blocks:
            langs = ", ".join(sorted({b.lang or "plain" for b in blocks}))
            raise InvalidResponse(f"no CUDA code block in the answer (only {langs} blocks): return the complete "
                                  "editable part in one ```cuda block")
        raise InvalidResponse("no ```cuda code block in the answer: return the complete editable part in one "
                              "```cuda block")
    if len(code_blocks) == 1:
        chosen = code_blocks[0]
    else:
        names = [sig.name for sig in (parse_signature(d) for d in required_exports(request)) if sig]
        with_launcher = [b for b in code_blocks if names and all(_defines_name(b.code, n) for n in names)]
        pool = with_launcher or [b for b in code_blocks if any(re.search(rf"\b{re.escape(n)}\b", b.code)
                                                                for n in names)] or code_blocks
        chosen = max(pool, key=lambda b: len(b.code))
        which = f"the one defining {', '.join(names)}" if with_launcher else "the largest"
        notes.append(f"the answer had {len(code_blocks)} code blocks; took {which} (line {chosen.start_line})")
    outside = body.replace(chosen.code, "", 1)
    if re.sub(r"(?im)^\s*(?:\*\*)?approach(?:\*\*)?\s*:.*$|```\w*|~~~\w*", "", outside).strip():
        notes.append("dropped the prose around the code block")
    return chosen.code


_APPROACH = re.compile(r"^[ \t>*_#-]*(?:\*\*|__)?approach(?:\*\*|__)?[ \t]*(?:\*\*|__)?[ \t]*[:\-][ \t]*(.+)$",
                       re.IGNORECASE | re.MULTILINE)


def extract_approach(text: str, limit: int = 120) -> str | None:
    """The answer's `Approach: ...` label (outside code and reasoning), cleaned to one ASCII line."""
    body, _ = strip_reasoning(text or "")
    for block in _code_blocks(body):
        body = body.replace(block.code, "\n", 1)
    m = _APPROACH.search(body)
    if not m:
        return None
    label = to_ascii(m.group(1)).strip().strip("*_`").strip()
    label = " ".join(label.split())
    if not label:
        return None
    return label if len(label) <= limit else label[: limit - 3].rstrip() + "..."
