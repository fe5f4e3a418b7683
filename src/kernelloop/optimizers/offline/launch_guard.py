"""Where a rewritten launch may stand in for the baseline's.

A launch the GPU refuses (more than 65535 blocks along y, a block of more than 1024 threads, more
threads than the kernel's registers allow, more dynamic shared memory than it may have) writes
nothing; a rewrite that runs in its place writes everything, a difference no size the harness
runs may show (red team round 114 on the axis tier, round 116 on the shipped transpose and
stencil: 524281 rows). So a rewrite runs only where the baseline's own launch is legal and the
rewrite's is too; everywhere else the baseline's launch runs as written, and fails as it would
have. The baseline's configuration is evaluated once, before either, as its launch would.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...program.scanner import split_top_level

GRID_LIMITS = (2147483647, 65535, 65535)  # blocks a grid may have along x, y, z
BLOCK_LIMITS = (1024, 1024, 64)  # threads a block may have along x, y, z


@dataclass(frozen=True)
class BaselineLaunch:
    """The baseline's launch statement with its configuration evaluated once into names."""
    kernel: str  # the launched function as written (`k`, `k<float>`, `ns::k`)
    grid: str  # names of the evaluated configuration (dim3, dim3, size_t)
    block: str
    shmem: str
    stream: str  # `, stream` as written, or ""
    declarations: str  # C statements evaluating the configuration
    statement: str  # the launch as written, with the evaluated configuration


def baseline_launch(statement: str, prefix: str = "kl_", parsed: list[str] | None = None) -> BaselineLaunch:
    """STATEMENT is a launch `k<<<grid, block[, shmem[, stream]]>>>(args);` as written; PARSED, its
    configuration as the parser read it (C text of each expression), is taken where the text's own
    split disagrees (a comparison in the grid, `n > 512 ? 512 : n`, reads as a bracket to a plain
    split). ValueError where the configuration is not written out there (`k<<<LAUNCH_CONFIG(n)>>>`:
    a macro's expansion gives grid and block)."""
    start, end = statement.find("<<<"), statement.find(">>>")
    config = [c.strip() for c in split_top_level(statement[start + 3:end])] if 0 <= start < end else []
    if parsed is not None and len(parsed) != len(config):
        config = list(parsed)
    if len(config) < 2 or not all(config[:2]):
        raise ValueError("is launched with a configuration not written out as grid and block (a macro that "
                         "expands to both, say), which the rewritten launch's guard cannot name")
    head, tail = statement[:start], statement[end + 3:]
    grid, block, shmem = f"{prefix}grid", f"{prefix}block", f"{prefix}shmem"
    stream = "".join(f", {c}" for c in config[3:])
    declarations = (f"const dim3 {grid} = dim3({config[0]}); const dim3 {block} = dim3({config[1]}); "
                    f"const size_t {shmem} = (size_t)({config[2] if len(config) > 2 else '0'});")
    return BaselineLaunch(kernel=head.strip(), grid=grid, block=block, shmem=shmem, stream=stream,
                          declarations=declarations,
                          statement=f"{head}<<<{grid}, {block}, {shmem}{stream}>>>{tail}".strip())


# cudaFuncGetAttributes costs a few microseconds of host time: asked on every call of the launcher,
# it made a rewrite slower than the baseline at small sizes (1.07-1.25x for a GEMM of 258x621x1
# whose rewrite was 4.24x faster at the timed size). So the guard asks once per kernel and device
# for what cannot change, maxThreadsPerBlock (its registers, its launch bounds), and keeps it in the
# static locals of a static function: internal to the part's object, where the policy refuses
# thread_local and the static locals of inline and template functions. Its slots are scalars, read
# and written at fixed addresses (the host code scan refuses an indexed table: a computed pointer),
# and it is never inlined: inlined at two guards, gcc kept `&device` in a register across branches,
# and the scan (which follows an out-pointer only within a straight-line stretch) refused the call.
# maxDynamicSharedSizeBytes is what cudaFuncSetAttribute last set: a launch that asks for dynamic
# shared memory asks the runtime every time, as does one that finds every slot taken.
ATTRIBUTE_SLOTS = 8


def attributes_helper(prefix: str = "kl_") -> str:
    """C++: `<prefix>kernel_takes(kernel, threads, shmem)`, which legal_launch calls: true where the
    kernel's attributes allow a block of THREADS threads and SHMEM bytes of dynamic shared memory
    (false where they cannot be read). Defined once at namespace scope in a part, before the launchers
    it guards."""
    p, slots = prefix, range(ATTRIBUTE_SLOTS)
    return "\n".join([
        "// kernelloop: a kernel's maxThreadsPerBlock asked once per device (see launch_guard.py)",
        f"static __noinline__ bool {p}kernel_takes(const void* {p}kernel, unsigned long long {p}threads, "
        f"unsigned long long {p}shmem) {{",
        *(f"  static const void* {p}kernel{i} = 0; static int {p}device{i} = 0, {p}threads{i} = 0;" for i in slots),
        f"  int {p}device = 0;",
        f"  if (::cudaGetDevice(&{p}device) != cudaSuccess) return false;",
        f"  if ({p}shmem == 0) {{",
        *(f"    if ({p}kernel{i} == {p}kernel && {p}device{i} == {p}device) return {p}threads <= "
          f"(unsigned long long){p}threads{i};" for i in slots),
        "  }",
        f"  cudaFuncAttributes {p}attributes;",
        f"  if (::cudaFuncGetAttributes(&{p}attributes, {p}kernel) != cudaSuccess) return false;",
        f"  if ({p}shmem == 0) {{",
        *(f"    {'' if i == 0 else 'else '}if (!{p}kernel{i}) {{ {p}device{i} = {p}device; "
          f"{p}threads{i} = {p}attributes.maxThreadsPerBlock; {p}kernel{i} = {p}kernel; }}" for i in slots),
        "  }",
        f"  return {p}threads <= (unsigned long long){p}attributes.maxThreadsPerBlock && "
        f"{p}shmem <= (unsigned long long){p}attributes.maxDynamicSharedSizeBytes;",
        "}",
        ""])


def legal_launch(kernel: str, grid: str, block: str, shmem: str, prefix: str = "kl_") -> str:
    """C: true where launching KERNEL with GRID and BLOCK (dim3 expressions) and SHMEM bytes of
    dynamic shared memory is legal on the device: every dimension within CUDA's limits, the block
    within what the kernel's registers allow, the shared memory within what it may have (the
    kernel's part through attributes_helper(PREFIX), which the part defines before)."""
    dims = []
    for axis, g_max, b_max in zip("xyz", GRID_LIMITS, BLOCK_LIMITS):
        dims.append(f"({grid}).{axis} >= 1u && ({grid}).{axis} <= {g_max}u")
        dims.append(f"({block}).{axis} >= 1u && ({block}).{axis} <= {b_max}u")
    threads = f"(unsigned long long)({block}).x * ({block}).y * ({block}).z"
    return (f"{prefix}kernel_takes((const void*){kernel}, {threads}, (unsigned long long)({shmem})) && "
            f"{' && '.join(dims)}")


def guarded(base: BaselineLaunch, rewritten: str, conditions: list[str], prefix: str = "kl_",
            declarations: str = "") -> str:
    """A block: the baseline's configuration evaluated, then DECLARATIONS (C statements computing
    what the conditions and the rewrite read), then REWRITTEN (statements) where the
    baseline's launch is legal and every one of CONDITIONS holds (the rewrite's own legality among
    them: legal_launch), else the baseline's launch as written. The part defines
    attributes_helper(PREFIX) before the block."""
    checks = [legal_launch(base.kernel, base.grid, base.block, base.shmem, prefix), *conditions]
    # the arithmetic first, the runtime queries (kernel_takes) last: where a condition sends the call
    # to the baseline's launch, it costs no runtime call (a one-column row norm on an H100 was 1.55x
    # the baseline's time at 12982 x 1, a 3 us kernel, behind the query it did not need)
    checks = sorted(checks, key=lambda c: f"{prefix}kernel_takes(" in c)
    return (f"{{ {base.declarations} {declarations + ' ' if declarations else ''}"
            f"if ({' && '.join(f'({c})' for c in checks)}) {{ {rewritten} }} else {{ {base.statement} }} }}")
