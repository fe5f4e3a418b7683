"""Problem sizes, when the harness fixes them: constants and the harness's call of the launcher.

The cost model ranks configurations by how many blocks they launch, so it wants M, N, K (or
rows, cols, n). They are read, not guessed: integer constants of the preamble and harness
(`static const int N = 1 << 26;`, `#define ROWS 4000`, `const int k = 512;`) are evaluated,
then the arguments of the harness's first call of the launcher. Anything not computable stays
unknown and the ranking uses a default size.

A contract-v2 harness (kernelloop_harness.cuh) takes its sizes from the harness object,
`const int n = h.size({N, 768});`, and calls the launcher inside a lambda passed to `h.run`.
`size` returns its first option unless the verifier asks for another (a check of correctness
only), so such a variable, whatever the object's name, takes the first option: the size that
is timed.
"""

from __future__ import annotations

import re

from ...program.scanner import strip_comments
from .cparse import UNKNOWN_NAMES, call_arguments, declared_names, parse_expression
from .facts import SIZEOF, integer_of
from .launcher import Launcher
from .symbolic import Poly
from .syntax import Binary, Call, Cast, Expr, InitList, Member, Name, Num, ParseError, SizeOf, Unary

_INT_WORDS = r"(?:unsigned|signed|long|short|int|size_t|std::size_t|u?int(?:8|16|32|64)_t)"
_INT_TYPES = rf"(?:{_INT_WORDS}\s+)+"


def is_integer_type(text: str) -> bool:
    """Whether TEXT spells an integer type (`int`, `unsigned long long`, `int32_t`, `size_t`, ...)."""
    return re.fullmatch(rf"{_INT_WORDS}(?:\s+{_INT_WORDS})*", text.strip()) is not None
_CONST_DECL = re.compile(rf"\b(?:constexpr|const)\s+{_INT_TYPES}([A-Za-z_]\w*)\s*=\s*([^;{{}}]+);")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([^\n]+)$", re.M)
# Contract v2: a variable initialised from the harness object's size options, const or not, any
# integer type or auto: `const int n = h.size({N, 768});`, `auto rows = bench->size<int>({R, 300});`.
_SIZE_OF_HARNESS = r"(?:\.|->)\s*size\s*(?:<[^<>;{}()]*>\s*)?\(\s*\{"
_SIZE_DECL = re.compile(rf"(?<![\w:.])(?:(?:constexpr|const|static|auto|{_INT_WORDS})\s+)+([A-Za-z_]\w*)\s*=\s*"
                        rf"([^;]*?{_SIZE_OF_HARNESS}[^;]*);")
_SIZE_TEMPLATE_ARGS = re.compile(r"((?:\.|->)\s*size)\s*<[^<>;{}()]*>")


def eval_int(e: Expr, env: dict[str, int]) -> int | None:
    if isinstance(e, Num):
        if e.is_float:
            return None
        # a suffixed literal, or one too big for int, is unsigned or wider: its arithmetic is not int's,
        # which is all this evaluates (red team round 119: `(-1 / 0xFFFFFFFF)` is 1 in C)
        v = int(e.value)
        return None if re.search(r"[uUlL]", e.text) or v >= 1 << 31 else v
    if isinstance(e, Name):
        return env.get(e.id)
    if isinstance(e, Cast):
        # the conversion as C makes it (red team round 118: `(unsigned char)300` read as 300)
        v, kind = eval_int(e.operand, env), integer_of(e.type)
        if v is None or kind is None:
            return None
        bits, signed = kind
        v &= (1 << bits) - 1
        return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v
    if isinstance(e, SizeOf):
        return SIZEOF.get(e.text) if e.operand is None else None
    if isinstance(e, Unary) and e.op in ("-", "+"):
        v = eval_int(e.operand, env)
        return None if v is None else (-v if e.op == "-" else v)
    if isinstance(e, Call) and isinstance(e.func, Member) and e.func.field == "size" and len(e.args) == 1 \
            and isinstance(e.args[0], InitList) and e.args[0].items:
        return eval_int(e.args[0].items[0], env)  # a v2 harness's `h.size({default, other, ...})`
    if isinstance(e, Binary):
        a, b = eval_int(e.left, env), eval_int(e.right, env)
        if a is None or b is None:
            return None
        v = _binary(e.op, a, b)
        # past int's range the C result depends on types not tracked here (`65536 * 65536` is 0 in
        # int, 2^32 in long long): unknown (red team round 118)
        return v if v is not None and -(1 << 31) <= v < (1 << 31) else None
    return None


def _binary(op: str, a: int, b: int) -> int | None:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("/", "%") and b != 0:
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C truncates toward zero
        return q if op == "/" else a - q * b
    if op == "<<" and 0 <= b < 63 and a >= 0:
        return a << b
    if op == ">>" and 0 <= b < 63:
        return a >> b
    return None


def constants(*texts: str) -> dict[str, int]:
    """Integer constants defined in the texts, in order (later ones may use earlier ones)."""
    env: dict[str, int] = {}
    for text in texts:
        code = strip_comments(text)
        found = [(m.start(), m.group(1), m.group(2)) for m in _CONST_DECL.finditer(code)]
        found += [(m.start(), m.group(1), m.group(2)) for m in _DEFINE.finditer(code)]
        found += [(m.start(), m.group(1), _SIZE_TEMPLATE_ARGS.sub(r"\1", m.group(2)))
                  for m in _SIZE_DECL.finditer(code)]
        for _, name, value in sorted(found):
            try:
                v = eval_int(parse_expression(value.strip()), env)
            except ParseError:
                continue
            if v is not None:
                env.setdefault(name, v)
    return env


_CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b[ \t]*([A-Za-z_]\w*)?", re.M)
_UNDEF = re.compile(r"^[ \t]*#[ \t]*undef[ \t]+([A-Za-z_]\w*)", re.M)


def known_constants(*texts: str) -> dict[str, int]:
    """The constants whose value is the one every line of the program sees, as int: an `int`
    `const`/`constexpr` or a `#define`, defined once in all the texts, not under `#if`/`#ifdef` (an
    include guard aside), never `#undef`'d, no other declaration of the name anywhere (a namespace's,
    a function's local, an enumerator, a member), never assigned (integral_constants), and defined
    only through such constants (red team rounds 118-119: the first of two definitions read as the
    kernel's, or a trusted name defined through an untrusted one, and a recurrence `y[c - LAG]` read
    as no dependence). Lines continued with a backslash are joined first, as the compiler does."""
    codes = [_spliced(strip_comments(t)) for t in texts]
    counts: dict[str, int] = {}
    conditional: set[str] = set()
    undefined: set[str] = set()
    found: list[tuple[int, int, str, str, str]] = []  # (text, position, name, value, declared type)
    defines = _counts_of_defines(codes)
    for code in codes:
        undefined.update(_UNDEF.findall(code))
    for t, code in enumerate(codes):
        guarded = _conditional_spans(code, defines)
        for pattern in (_CONST_DECL, _DEFINE):
            for m in pattern.finditer(code):
                counts[m.group(1)] = counts.get(m.group(1), 0) + 1
                if any(a <= m.start() < b for a, b in guarded):
                    conditional.add(m.group(1))
                declared = "int" if pattern is _DEFINE else \
                    re.sub(r"\b(?:static|constexpr|const)\b", " ", code[m.start():m.start(1)]).strip()
                found.append((t, m.start(), m.group(1), m.group(2), declared))
    single = integral_constants(*codes)
    env: dict[str, int] = {}
    for _, _, name, value, declared in sorted(found):
        if counts.get(name) != 1 or name not in single or name in conditional or name in undefined or \
                " ".join(declared.split()) not in ("int", "signed int", "signed"):
            continue
        try:
            v = eval_int(parse_expression(value.strip()), env)  # env holds only names trusted so far
        except ParseError:
            continue
        if v is not None:
            env[name] = v
    return env


def _spliced(code: str) -> str:
    """CODE with its backslash-newline line continuations joined (translation phase 2)."""
    return re.sub(r"\\[ \t]*\r?\n", "", code)


def _counts_of_defines(codes: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for code in codes:
        for m in _DEFINE_NAME.finditer(code):
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts


_DEFINE_NAME = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)


def _conditional_spans(code: str, defines: dict[str, int]) -> list[tuple[int, int]]:
    """The spans of `#if`/`#ifdef`/`#ifndef` ... `#endif` regions, outermost, save an include guard
    (`#ifndef G` followed by `#define G`, closed by the text's last `#endif`, G defined nowhere else:
    DEFINES counts each macro's definitions)."""
    spans: list[tuple[int, int]] = []
    depth, start = 0, 0
    directives = list(_CONDITIONAL.finditer(code))
    for i, m in enumerate(directives):
        word = m.group(1)
        if word in ("if", "ifdef", "ifndef"):
            if depth == 0:
                start = m.start()
                guard = word == "ifndef" and m.group(2) is not None and \
                    re.match(rf"\s*#[ \t]*define[ \t]+{re.escape(m.group(2))}\b", code[m.end():]) is not None and \
                    not code[_matching_endif(directives, i):].strip("\n ").replace("#endif", "", 1).strip()
                if guard and defines.get(m.group(2)) == 1:
                    continue  # an include guard: what it holds is seen once, whole
            depth += 1
        elif word == "endif" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((start, m.end()))
    if depth > 0:
        spans.append((start, len(code)))
    return spans


def _matching_endif(directives: list[re.Match], i: int) -> int:
    depth = 0
    for m in directives[i:]:
        if m.group(1) in ("if", "ifdef", "ifndef"):
            depth += 1
        elif m.group(1) == "endif":
            depth -= 1
            if depth == 0:
                return m.start()
    return len(directives[-1].string)


def integral_constants(*texts: str) -> frozenset[str]:
    """Names of constants the texts prove integral (red team rounds 90-92): each definition is an
    integer-typed `const`/`constexpr`, or a `#define` whose body is integer arithmetic of literals
    and such names; with those definitions left out, the parser finds no other declaration of the
    name (`const float a = 1, (K) = 0.5f;`, a struct member, an enumerator, another `#define` under
    another `#if`), and nothing assigns to it."""
    code = "\n".join(strip_comments(t) for t in texts)
    bodies: dict[str, list[str | None]] = {}
    blanked = list(code)
    for pattern, typed in ((_CONST_DECL, True), (_DEFINE, False)):
        for m in pattern.finditer(code):
            bodies.setdefault(m.group(1), []).append(None if typed else m.group(2))
            blanked[m.start():m.end()] = [c if c == "\n" else " " for c in m.group(0)]
    rest = "".join(blanked)
    elsewhere = declared_names(rest)
    if UNKNOWN_NAMES in elsewhere:
        return frozenset()
    proven: set[str] = set()
    for _ in range(4):  # a constant may be defined through earlier ones
        for name, defs in bodies.items():
            assigned = re.search(rf"(?<![\w.>:]){re.escape(name)}\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|"
                                 rf"(?:\+\+|--)\s*{re.escape(name)}\b|\b{re.escape(name)}\s*(?:\+\+|--)", rest)
            if name not in elsewhere and not assigned and all(d is None or _integral_text(d, proven) for d in defs):
                proven.add(name)
    return frozenset(proven)


def _integral_text(text: str, proven: set[str]) -> bool:
    try:
        e = parse_expression(text.strip())
    except ParseError:
        return False
    return _integral_expr(e, proven)


def _integral_expr(e: Expr, proven: set[str]) -> bool:
    if isinstance(e, Num):
        return not e.is_float
    if isinstance(e, Name):
        return e.id in proven
    if isinstance(e, Cast):
        return is_integer_type(e.type) and _integral_expr(e.operand, proven)
    if isinstance(e, Unary):
        return e.op in ("-", "+", "~") and _integral_expr(e.operand, proven)
    if isinstance(e, Binary):
        return e.op in ("+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^") and \
            _integral_expr(e.left, proven) and _integral_expr(e.right, proven)
    return False


def harness_call(harness: str, launcher: str) -> tuple[Expr, ...] | None:
    """The arguments of the harness's first call of `launcher`, wherever it stands: in `main`
    itself (contract v1) or in the lambda a v2 harness passes to `h.run([&] { ... })`."""
    calls = call_arguments(strip_comments(harness), launcher)
    return calls[0] if calls else None


def role_values(polys: dict[str, Poly], lau: Launcher, kernel_params: list[str], preamble: str,
                harness: str) -> dict[str, int | None]:
    """Concrete values of integer roles (kernel-side polynomials) for the harness's call."""
    env = constants(preamble, harness)
    call = harness_call(harness, lau.fn.name)
    launcher_env = dict(env)
    if call is not None and len(call) == len(lau.fn.sig.params):
        for prm, arg in zip(lau.fn.sig.params, call):
            v = eval_int(arg, env)
            if v is not None:
                launcher_env[prm.name] = v
    kernel_env: dict[str, int] = {}
    if len(lau.args) == len(kernel_params):
        for name, arg in zip(kernel_params, lau.args):
            v = eval_int(arg, launcher_env)
            if v is not None:
                kernel_env[f"p:{name}"] = v
    for name, v in env.items():
        kernel_env[f"g:{name}"] = v
    return {role: p.evaluate(kernel_env) for role, p in polys.items()}
