"""Matmul: a per-thread loop over k accumulating X[r*K + k] * Y[k*N + c], stored to Z[r*N + c];
either operand may be stored transposed (X[k*M + r]: A^T * B; Y[c*K + k]: A * B^T, llm.c's
matmul_forward), which the candidate copies into row-major form each call.

Roles come from the indexing alone: the operand indexed r*K + k is A, the one indexed
k*N + c is B, the stored array is C; K is the loop bound (and A's row stride), N is B's row
stride (and C's), M is the guard on r. Row and column are thread coordinates, or the quotient
and the remainder of one flat thread index i by N (`r = i / N; c = i % N`) under a guard
i < M * N, stored at i or at r*N + c. The kernel must do nothing else: no other loads,
stores or atomics, and an accumulator that starts at zero. What is stored is the accumulator
or an epilogue of it: arithmetic of the accumulator, the old C[r*N + c], the kernel's float
scalars and literals (C = alpha * A * B + beta * C), which the templates apply as written.
"""

from __future__ import annotations

from ..conditions import loop_bound, loop_start, upper_bound
from ..facts import KernelFacts, ScalarAssign
from ..launcher import Binder
from ..symbolic import Poly, is_uniform, split_thread
from ..syntax import Binary, Call, Expr, Name, Num, Ternary, Unary, call_name, to_c, walk_expr
from .coverage import covers_range, index_width
from .base import (
    Config,
    Match,
    Mismatch,
    ceil_div,
    coordinate_form,
    is_coordinate,
    is_float_pointer,
    is_zero_literal,
    param_arrays,
    read_target,
    role_texts,
    strip_casts,
    unreadable_access,
)

NAME = "matmul"
ROLES = ("A", "B", "C", "M", "N", "K")
INT_ROLES = ("M", "N", "K")

# (BM, BN, BK, TM, TN); the first is the exemplar's (5.69x on an H200 at 1024^3).
REGISTER_BLOCKING = [(64, 64, 16, 4, 4), (128, 128, 8, 8, 8), (128, 64, 16, 8, 4), (64, 128, 16, 4, 8),
                     (64, 32, 16, 4, 4), (32, 64, 16, 4, 4)]
TILES = [32, 16]
_PRIOR_REGISTER_BLOCKING = 5.7  # exemplars/matmul_register_blocking.cu on an H200
_PRIOR_TILING = {32: 1.74, 16: 1.3}  # exemplars/matmul_smem_tiling.cu (32); 16: fewer FMAs per load


def _product(f: KernelFacts, e: Expr) -> tuple[Expr, Expr] | None:
    e = strip_casts(f.resolve(e))
    if isinstance(e, Binary) and e.op == "*":
        return e.left, e.right
    return None


def _accumulation(f: KernelFacts, a: ScalarAssign) -> tuple[Expr, Expr] | None:
    """The two factors when `a` is acc += x*y, acc = acc + x*y or acc = fmaf(x, y, acc)."""
    if a.value is None:
        return None
    if a.op == "+=":
        return _product(f, a.value)
    if a.op != "=":
        return None
    v = strip_casts(f.resolve(a.value))
    same = lambda x: f.binding(strip_casts(x)) is a.binding  # noqa: E731
    if isinstance(v, Binary) and v.op == "+":
        if same(v.left):
            return _product(f, v.right)
        if same(v.right):
            return _product(f, v.left)
    if isinstance(v, Call) and call_name(v) in ("fmaf", "fma", "__fmaf_rn") and len(v.args) == 3 and same(v.args[2]):
        return v.args[0], v.args[1]
    return None


# Float functions an epilogue may apply as written (the template's functor calls the same ones,
# so a fused bias, clamp or activation is computed exactly as the baseline computes it).
_EPILOGUE_CALLS = ("fmaf", "fma", "__fmaf_rn", "fminf", "fmaxf", "fabsf", "expf", "__expf", "tanhf", "erff",
                   "sqrtf", "rsqrtf", "logf", "log1pf")
_COMPARISONS = ("<", ">", "<=", ">=", "==", "!=")
_NULL_NAMES = ("NULL", "nullptr")


class _Terms:
    """Arithmetic around the sum, translated for the templates' functor: the accumulator (acc), the
    old C element (c_old), the kernel's float scalars (kl_e<i>) and float vectors read at the
    output's row or column (kl_v<j>[r], kl_v<j>[c]: a bias, a per-row scale), literals, the float
    functions above, comparisons and null tests of a vector (`bias != NULL ? bias[oc] : 0.0f`).
    One instance reads both the accumulator's start and the stored value, so their scalars and
    vectors share one numbering."""

    def __init__(self, f: KernelFacts, store, row: Poly, col: Poly) -> None:
        self.f, self.store, self.row, self.col = f, store, row, col
        self.scalars: list[str] = []  # float scalar parameters, in order of kl_e<i>
        self.vectors: list = []  # float pointer parameters, in order of kl_v<j>
        self.vector_reads: list[tuple[object, Poly]] = []  # (array, offset) of every vector load

    def _vector(self, b) -> str:
        if b not in self.vectors:
            self.vectors.append(b)
        return f"kl_v{self.vectors.index(b)}"

    def _check(self, e: Expr, accs: list, allow_old: bool) -> str | None:
        f = self.f
        e = strip_casts(e)
        target = read_target(f, e)
        if target is not None:
            array, offset = target
            if array is self.store.array:
                if allow_old and offset == self.store.offset:
                    return None
                return "the stored value reads memory other than the old value of the element it writes"
            if not is_float_pointer(array) or offset not in (self.row, self.col):
                return "reads memory other than the operands, the old result and float vectors at its row or column"
            self._vector(array)
            self.vector_reads.append((array, offset))
            return None
        if isinstance(e, Num):
            return None
        if isinstance(e, Name):
            if e.id in _NULL_NAMES and f.binding(e) is None:
                return None
            b = f.binding(e)
            if b is None:
                return f"the stored value names {e.id}, which the kernel does not declare"
            if b.param is not None:
                if b.pointer == 1 and is_float_pointer(b):  # a vector's null test
                    self._vector(b)
                    return None
                if b.pointer or b.type != "float":
                    return "the stored value uses a parameter that is not a float scalar"
                if b.name not in self.scalars:
                    self.scalars.append(b.name)
            elif b.pointer or b.array:
                return "the stored value names an array"
            elif b not in accs:
                accs.append(b)
            return None
        if isinstance(e, Unary) and e.op in ("-", "+", "!"):
            return self._check(e.operand, accs, allow_old)
        if isinstance(e, Binary) and e.op in ("+", "-", "*", "/", "&&", "||", *_COMPARISONS):
            return self._check(e.left, accs, allow_old) or self._check(e.right, accs, allow_old)
        if isinstance(e, Ternary):
            return next((why for why in (self._check(x, accs, allow_old) for x in (e.cond, e.then, e.other)) if why),
                        None)
        if isinstance(e, Call) and call_name(e) in _EPILOGUE_CALLS:
            return next((why for why in (self._check(a, accs, allow_old) for a in e.args) if why), None)
        return "the stored value is not plain arithmetic of the accumulator"

    def _text(self, e: Expr, acc) -> str:
        f = self.f

        def sub(x: Expr) -> str | None:
            target = read_target(f, x)
            if target is not None:
                array, offset = target
                if array is self.store.array:
                    return "c_old"
                return f"{self._vector(array)}[{'r' if offset == self.row else 'c'}]"
            if isinstance(x, Name):
                if x.id in _NULL_NAMES and f.binding(x) is None:
                    return "nullptr"
                b = f.binding(x)
                if b is not None and acc is not None and b is acc:
                    return "acc"
                if b is not None and b.param is not None:
                    return self._vector(b) if b.pointer else f"kl_e{self.scalars.index(b.name)}"
            return None

        return to_c(e, sub)

    def stored(self, value: Expr) -> tuple[object, str] | str:
        """(the accumulator's binding, the stored value as functor text) or why it is no
        arithmetic of one accumulator."""
        accs: list = []
        why = self._check(value, accs, allow_old=True)
        if why:
            return why
        if len(accs) != 1:
            return "the stored value is not an expression of one scalar accumulator"
        return accs[0], self._text(value, accs[0])

    def start(self, value: Expr) -> str:
        """The accumulator's starting value as functor text ("" where it names a local or the old
        result: not a start the template can compute before the sum)."""
        if is_zero_literal(value):
            return "0.0f"
        accs: list = []
        if self._check(value, accs, allow_old=False) or accs:
            return ""
        return self._text(value, None)


def match(f: KernelFacts, binder: Binder) -> Match | Mismatch:
    def no(reason: str) -> Mismatch:
        return Mismatch(NAME, reason)

    if (why := unreadable_access(f)) is not None:
        return no(why)
    stores = param_arrays(f, "store")
    if any(a.kind == "atomic" for a in f.accesses):
        return no("uses atomics")
    if len(stores) != 1 or stores[0].op != "=" or stores[0].ctx.loops:
        return no("expects exactly one plain store of the result, outside any loop")
    store = stores[0]
    value = f.resolve(store.value) if store.value is not None else None
    if store.offset is None:
        return no("the store's index is not a polynomial")
    form = coordinate_form(store.offset)
    # a flat thread index split into the row and the column (`row = i / N; col = i % N`), stored at i
    # or at row*N + col
    flat = _flat_split(f, index=store.offset) if form is None else \
        _flat_split(f, row=form[1], col=form[2]) if any(a.startswith("t:") for a in store.offset.atoms()) else None
    if form is None and flat is None:
        return no("the store is not at row*N + col (nor at a flat index split into row = i / N, col = i % N)")
    if flat is not None:
        flat_index, row, col, n_stride = flat
        if form is not None and Poly(((form[0], 1),)) != n_stride:
            return no("the store's row stride is not the divisor of its flat index")
    else:
        s_key, row, col = form  # type: ignore[misc]
        n_stride = Poly(((s_key, 1),))
    terms = _Terms(f, store, row, col)
    acc = f.binding(strip_casts(value)) if value is not None else None
    epilogue = "acc"
    if value is not None and (acc is None or acc.param is not None or acc.pointer or acc.array):
        found = terms.stored(value)
        if isinstance(found, str):
            return no(found)
        acc, epilogue = found
    if acc is None or acc.param is not None or acc.pointer or acc.array:
        return no("the stored value is not a scalar accumulator")
    if acc.type.replace("const ", "").strip() != "float":
        return no(f"the accumulator is a {acc.type}, not a float (the templates sum in float)")
    assigns = [a for a in f.assigns if a.binding is acc]
    inits = [a for a in assigns if a.op == "decl"]
    updates = [a for a in assigns if a.op != "decl"]
    if len(inits) != 1 or inits[0].value is None or len(updates) != 1:
        return no("the accumulator is not set once and updated once")
    acc_start = terms.start(inits[0].value)
    if not acc_start:
        return no("the accumulator starts at neither zero nor arithmetic of float scalars and vectors at the "
                  "output's row or column")
    update = updates[0]
    factors = _accumulation(f, update)
    if factors is None or not update.ctx.loops:
        return no("no loop accumulating a product of two loads")
    if update.ctx.conds != store.ctx.conds or len(update.ctx.loops) != 1:
        return no("the accumulation is conditional or nested in another loop")
    loop = update.ctx.loops[-1]
    if not loop.unit_step or loop.var is None:
        return no("the accumulation loop does not step by one")
    start = loop_start(f, loop)
    if start is None or not (start.is_zero or (start.is_const and start.const_value == 0)):
        return no("the accumulation loop does not start at 0")
    K = loop_bound(f, loop)
    if K is None:
        return no("the accumulation loop has no bound like k < K")
    reads = [read_target(f, x) for x in factors]
    if any(r is None for r in reads):
        return no("the product's factors are not plain loads")
    kvar = Poly.atom(f"L:{loop.var}")
    if not (is_coordinate(row) and is_coordinate(col)) or row == col:
        return no("row and column are not distinct thread coordinates")
    if flat is not None:
        # i < M*N with row = i / N and col = i % N: every (row < M, col < N) once, stored at row*N + col
        M = _quotient(upper_bound(f, store.ctx, flat_index), n_stride)
        if M is None:
            return no(f"no guard i < M * {n_stride} around the store at the flat index i")
        bounds = [(flat_index, M * n_stride)]
    else:
        M = upper_bound(f, store.ctx, row)
        col_bound = upper_bound(f, store.ctx, col)
        if M is None or col_bound is None:
            return no("no guard row < M and col < N around the store")
        if col_bound != n_stride:
            return no(f"the column guard {col_bound} is not the row stride {n_stride}")
        bounds = [(row, M), (col, n_stride)]
    # Each factor by its index: the one on the store's row is A, on its column B. A is read along k
    # (row*K + k) or, stored transposed (K x M, an A^T * B kernel), across it (k*M + row); B is read
    # across k (k*N + col) or, stored transposed (N x K, A * B^T), along it (col*K + k).
    operands: dict[str, tuple[object, bool]] = {}  # role -> (array binding, stored transposed)
    for arr, off in reads:  # type: ignore[misc]
        along, across = split_k(off, kvar), split_kn(off, kvar)
        for stride, coord, k_contiguous in ([(*along, True)] if along else []) + ([(*across, False)] if across else []):
            if coord == row and "A" not in operands:
                if k_contiguous and stride == K:
                    operands["A"] = (arr, False)
                elif not k_contiguous and stride == M:
                    operands["A"] = (arr, True)
                else:
                    continue
                break
            if coord == col and "B" not in operands:
                if not k_contiguous and stride == n_stride:
                    operands["B"] = (arr, False)
                elif k_contiguous and stride == K:
                    operands["B"] = (arr, True)
                else:
                    continue
                break
    if "A" not in operands:
        return no("no factor indexed row*K + k (or k*M + row, A stored transposed)")
    if "B" not in operands:
        return no("no factor indexed k*N + col (or col*K + k, B stored transposed)")
    (A, a_transposed), (B, b_transposed) = operands["A"], operands["B"]
    if (a_transposed or b_transposed) and binder.launcher.stream is not None:
        # the row-major copy lives in a workspace kept between calls: calls on two streams would share it
        return no("an operand stored transposed, launched on a stream it is given (the copy's workspace, kept "
                  "between calls, would be shared by calls on different streams)")
    C = store.array
    if not (is_float_pointer(A) and is_float_pointer(B) and is_float_pointer(C, writable=True)):
        return no("operands are not fp32 arrays")
    if C is A or C is B:
        return no("the result overwrites an operand")
    operand_reads = [a for a in param_arrays(f, "read") if not (a.array is C and a.offset == store.offset)
                     and not any(a.array is v and a.offset == off for v, off in terms.vector_reads)]
    if len(operand_reads) != 2:
        return no("reads more than the two operands, the old result and float vectors at its row or column")
    # the template writes every element below M x N: so must the baseline, at every size
    # (a vector's read is part of the arithmetic the functor copies, its null test included)
    computed = [a for a in param_arrays(f) if not any(a.array is v and a.offset == off for v, off in terms.vector_reads)]
    reach = covers_range(f, binder, computed, bounds)
    exact = index_width(f, binder, param_arrays(f), [M * K, K * n_stride, M * n_stride])
    if isinstance(reach, str) or isinstance(exact, str):
        return no(reach if isinstance(reach, str) else str(exact))
    mapped = role_texts(binder, {"A": A, "B": B, "C": C}, {"M": M, "N": n_stride, "K": K})
    if isinstance(mapped, str):
        return no(mapped)
    roles, described = mapped
    # the functor's fields, in order: kl_e<i> (float scalars), then kl_v<j> (float vectors)
    passed = [(f"float kl_e{i}", f"kl_e{i}", binder.pointer_text(name)) for i, name in enumerate(terms.scalars)]
    passed += [(f"const float* kl_v{j}", f"kl_v{j}", binder.pointer_text(b.name)) for j, b in enumerate(terms.vectors)]
    if any(text is None for _, _, text in passed):
        return no("cannot map the epilogue's scalars and vectors to launcher arguments")
    names = [f"kl_e{i}={n}" for i, n in enumerate(terms.scalars)] + [f"kl_v{j}={b.name}"
                                                                      for j, b in enumerate(terms.vectors)]
    stored = "the sum" if epilogue == "acc" else f"{epilogue} of the sum acc and the old value c_old"
    stored += "" if acc_start == "0.0f" else f", the sum starting at {acc_start}"
    stored += f" ({', '.join(names)})" if names else ""
    a_read = "A[k*M + r] (A stored transposed)" if a_transposed else "A[r*K + k]"
    b_read = "B[c*K + k] (B stored transposed)" if b_transposed else "B[k*N + c]"
    layout = {**({"_HELPERS": _ROW_MAJOR_COPIES} if a_transposed or b_transposed else {}),
              **({"_ARG_A": "kl_row_major_a({A}, (int)({K}), (int)({M}), {_STREAM})"} if a_transposed else {}),
              **({"_ARG_B": "kl_row_major_b({B}, (int)({N}), (int)({K}), {_STREAM})"} if b_transposed else {})}
    return Match(NAME, f.sig.name, binder.launcher, roles, described, {},
                 detail=f"C[r*N + c] = {stored}, the sum over k < K of {a_read} * {b_read} "
                        f"(A={A.name}, B={B.name}, C={C.name}, M={M}, N={n_stride}, K={K})",
                 polys={"M": M, "N": n_stride, "K": K}, conditions=reach.divides + exact,
                 placeholders={"EPI_FIELDS": " ".join(f"{decl};" for decl, _, _ in passed),
                               "EPILOGUE": epilogue, "EPI_START": acc_start,
                               "EPI_PARAMS": "".join(f", {decl}" for decl, _, _ in passed),
                               "EPI_ARGS": "".join(f", {name}" for _, name, _ in passed),
                               "EPI_INIT": ", ".join(name for _, name, _ in passed),
                               "_EXTRA_ARGS": "\n".join(text for _, _, text in passed if text is not None),
                               **layout})


# An operand stored transposed is copied, every call, into a row-major workspace the launcher keeps
# (allocated again only when it must grow; each call rewrites it from that call's inputs), by a
# tiled transpose; the GEMM templates then read rows as they do for any A * B. The copy moves the
# operand twice, against the GEMM's M*N*K work. The sum's order over k is unchanged.
_ROW_MAJOR_COPIES = r"""
// kernelloop offline optimizer: an operand stored transposed, copied into row-major form each call.
__global__ void kl_transpose_copy(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[32][33];
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];
  ::__syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  y = blockIdx.x * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < rows && y + j < cols) out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

static float* kl_copy_a = nullptr;
static size_t kl_copy_a_bytes = 0;
static float* kl_copy_b = nullptr;
static size_t kl_copy_b_bytes = 0;

// in: rows x cols, row-major; the result: its transpose, cols x rows, row-major.
static const float* kl_transposed_into(const float* in, int rows, int cols, float*& held, size_t& held_bytes,
                                       cudaStream_t kl_stream) {
  const size_t bytes = (size_t)rows * (size_t)cols * sizeof(float);
  if (bytes == 0) return in;
  if (bytes > held_bytes) {
    if (held != nullptr) ::cudaFree(held);
    held = nullptr;
    held_bytes = 0;
    if (::cudaMalloc(&held, bytes) != cudaSuccess) return nullptr;
    held_bytes = bytes;
  }
  const dim3 block(32, 8), grid((cols + 31) / 32, (rows + 31) / 32);
  kl_transpose_copy<<<grid, block, 0, kl_stream>>>(in, held, rows, cols);
  return held;
}
static const float* kl_row_major_a(const float* a_stored, int k, int m, cudaStream_t kl_stream) {  // K x M -> M x K
  return kl_transposed_into(a_stored, k, m, kl_copy_a, kl_copy_a_bytes, kl_stream);
}
static const float* kl_row_major_b(const float* b_stored, int n, int k, cudaStream_t kl_stream) {  // N x K -> K x N
  return kl_transposed_into(b_stored, n, k, kl_copy_b, kl_copy_b_bytes, kl_stream);
}
"""


def _flat_split(f: KernelFacts, row: Poly | None = None, col: Poly | None = None,
                index: Poly | None = None) -> tuple[Poly, Poly, Poly, Poly] | None:
    """(index, row, col, N) where the kernel splits a flat thread index into a quotient and a
    remainder by one uniform N (`row = i / N; col = i % N`, locals or written in place): for i >= 0,
    i = row * N + col with col < N. Matched against the store's own ROW and COL, or its INDEX (`c[i]`).
    The index must be one thread coordinate (blockIdx * P + threadIdx)."""
    pieces: dict[tuple[Poly, str, Poly], Poly] = {}  # (i, op, N) -> the piece's polynomial (an opaque atom)
    roots = [a.node for a in f.accesses] + [a.value for a in f.assigns if a.value is not None]
    for root in roots:
        for e in walk_expr(f.resolve(root)):
            if not (isinstance(e, Binary) and e.op in ("/", "%")):
                continue
            i, n, piece = f.poly(e.left), f.poly(e.right), f.poly(e)
            if i is None or n is None or piece is None or not is_uniform(n) or n.is_const or not is_coordinate(i) \
                    or any(not a.startswith(("blockIdx.", "blockDim.", "threadIdx.")) for a in i.atoms()):
                continue
            pieces.setdefault((i, e.op, n), piece)
    for (i, op, n), quotient in pieces.items():
        remainder = pieces.get((i, "%", n))
        if op != "/" or remainder is None or (index is not None and i != index):
            continue
        if (row is None or row == quotient) and (col is None or col == remainder):
            return i, quotient, remainder, n
    return None


def _quotient(bound: Poly | None, n: Poly) -> Poly | None:
    """M where BOUND is M * N (N one monomial of atoms, M without them)."""
    if bound is None or len(n.terms) != 1 or n.terms[0][1] != 1:
        return None
    (atoms, _), = n.terms
    m = Poly._from({tuple(x for x in mono if x not in atoms): c for mono, c in bound.terms})
    return m if not m.is_zero and m * n == bound and not (m.atoms() & set(atoms)) else None


def split_k(off: Poly, kvar: Poly) -> tuple[Poly, Poly] | None:
    """off = row*S + k: (S as a polynomial, row)."""
    if off.coefficient(tuple(kvar.atoms())) != 1:
        return None
    rest = off - kvar
    if any(a.startswith("L:") for a in rest.atoms()):
        return None
    groups = split_thread(rest)
    if len(groups) != 1:
        return None
    ((key, major),) = groups.items()
    if not key or not is_coordinate(major):
        return None
    return Poly(((key, 1),)), major


def split_kn(off: Poly, kvar: Poly) -> tuple[Poly, Poly] | None:
    """off = k*S + col: (S, col)."""
    (katom,) = tuple(kvar.atoms())
    with_k = {m: c for m, c in off.terms if katom in m}
    if not with_k:
        return None
    stride_terms = []
    for m, c in with_k.items():
        rest = tuple(a for a in m if a != katom)
        if len(rest) == len(m) - 1 and rest:
            stride_terms.append((rest, c))
        else:
            return None
    stride = Poly(tuple(sorted(stride_terms)))
    if not all(a.startswith(("p:", "g:")) for a in stride.atoms()):
        return None
    col = off - stride * kvar
    if col.atoms() & {katom} or not is_coordinate(col) or any(not a.startswith(("threadIdx.", "blockIdx.",
                                                                                 "blockDim.", "gridDim.", "t:"))
                                                              for a in col.atoms()):
        return None
    return stride, col


def configs(m: Match, sms: int) -> list[Config]:
    M, N = m.sizes.get("M"), m.sizes.get("N")
    known = M is not None and N is not None and M > 0 and N > 0
    out: list[Config] = []
    tags = frozenset({"register-blocking", "smem-tiling", "vectorized"})
    for bm, bn, bk, tm, tn in REGISTER_BLOCKING:
        threads = (bm // tm) * (bn // tn)
        smem = 4 * (2 * bk * (bm + 4) + 2 * bk * bn)
        prior = _PRIOR_REGISTER_BLOCKING * ((bm * bn) / 4096) ** 0.15 * ((tm * tn) / 16) ** 0.15
        out.append(Config(
            template="matmul_register_blocking", technique="register blocking",
            params=(("BM", str(bm)), ("BN", str(bn)), ("BK", str(bk)), ("TM", str(tm)), ("TN", str(tn)),
                    ("ADAPTIVE", "false")),
            threads=threads, smem_bytes=smem, min_registers=tm * tn + tm + tn + 8,
            blocks=ceil_div(M, bm) * ceil_div(N, bn) if known else None,  # type: ignore[operator]
            prior=prior, tags=tags, best_known=(bm, bn, bk, tm, tn) == REGISTER_BLOCKING[0], memory_bound=False,
            label_override=f"register blocking BM={bm} BN={bn} BK={bk} TM={tm} TN={tn}"))
    if not known:
        # The size is decided at run time: the exemplar's rule (64x64 tiles, 128x128 once that grid
        # fills the GPU) is the best-known configuration.
        out.append(Config(
            template="matmul_register_blocking", technique="register blocking",
            params=(("BM", "64"), ("BN", "64"), ("BK", "16"), ("TM", "4"), ("TN", "4"), ("ADAPTIVE", "true")),
            threads=256, smem_bytes=4 * (2 * 16 * 68 + 2 * 16 * 64), min_registers=32, blocks=None,
            prior=_PRIOR_REGISTER_BLOCKING * 1.02, tags=tags, best_known=True, memory_bound=False,
            label_override="register blocking auto (BM=64 BN=64 BK=16 TM=4 TN=4; BM=128 BN=128 BK=8 TM=8 TN=8 "
                           "when that grid gives every SM a block)"))
    for t in TILES:
        out.append(Config(
            template="matmul_smem_tiling", technique="shared-memory tiling", params=(("TILE", str(t)),),
            threads=t * t, smem_bytes=2 * t * t * 4, min_registers=24,
            blocks=ceil_div(M, t) * ceil_div(N, t) if known else None,  # type: ignore[operator]
            prior=_PRIOR_TILING[t], tags=frozenset({"smem-tiling"}), best_known=False, memory_bound=True))
    return out
