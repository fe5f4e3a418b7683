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


def baseline_launch(statement: str, prefix: str = "kl_") -> BaselineLaunch:
    """STATEMENT is a launch `k<<<grid, block[, shmem[, stream]]>>>(args);` as written."""
    start, end = statement.index("<<<"), statement.index(">>>")
    config = [c.strip() for c in split_top_level(statement[start + 3:end])]
    head, tail = statement[:start], statement[end + 3:]
    grid, block, shmem = f"{prefix}grid", f"{prefix}block", f"{prefix}shmem"
    stream = "".join(f", {c}" for c in config[3:])
    declarations = (f"const dim3 {grid} = dim3({config[0]}); const dim3 {block} = dim3({config[1]}); "
                    f"const size_t {shmem} = (size_t)({config[2] if len(config) > 2 else '0'});")
    return BaselineLaunch(kernel=head.strip(), grid=grid, block=block, shmem=shmem, stream=stream,
                          declarations=declarations,
                          statement=f"{head}<<<{grid}, {block}, {shmem}{stream}>>>{tail}".strip())


def legal_launch(kernel: str, grid: str, block: str, shmem: str, attributes: str) -> str:
    """C: true where launching KERNEL with GRID and BLOCK (dim3 expressions) and SHMEM bytes of
    dynamic shared memory is legal on the device: every dimension within CUDA's limits, the block
    within what the kernel's registers allow, the shared memory within what it may have.
    ATTRIBUTES names a `cudaFuncAttributes` declared before."""
    dims = []
    for axis, g_max, b_max in zip("xyz", GRID_LIMITS, BLOCK_LIMITS):
        dims.append(f"({grid}).{axis} >= 1u && ({grid}).{axis} <= {g_max}u")
        dims.append(f"({block}).{axis} >= 1u && ({block}).{axis} <= {b_max}u")
    threads = f"(unsigned long long)({block}).x * ({block}).y * ({block}).z"
    return (f"cudaFuncGetAttributes(&{attributes}, {kernel}) == cudaSuccess && {' && '.join(dims)} && "
            f"{threads} <= (unsigned long long){attributes}.maxThreadsPerBlock && "
            f"(unsigned long long)({shmem}) <= (unsigned long long){attributes}.maxDynamicSharedSizeBytes")


def guarded(base: BaselineLaunch, rewritten: str, conditions: list[str], prefix: str = "kl_",
            declarations: str = "") -> str:
    """A block: the baseline's configuration evaluated, then DECLARATIONS (C statements computing
    what the conditions and the rewrite read), then REWRITTEN (statements) where the
    baseline's launch is legal and every one of CONDITIONS holds (the rewrite's own legality among
    them: legal_launch with `<prefix>attributes_new`), else the baseline's launch as written."""
    checks = [legal_launch(base.kernel, base.grid, base.block, base.shmem, f"{prefix}attributes"), *conditions]
    new = f"cudaFuncAttributes {prefix}attributes_new; " if any(f"{prefix}attributes_new" in c for c in conditions) else ""
    return (f"{{ {base.declarations} {declarations + ' ' if declarations else ''}cudaFuncAttributes "
            f"{prefix}attributes; {new}"
            f"if ({' && '.join(f'({c})' for c in checks)}) {{ {rewritten} }} else {{ {base.statement} }} }}")
