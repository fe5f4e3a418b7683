"""init's guard against state the generated program would not set as the user's program does.

`init` keeps the user's launcher and kernels and drops the rest of the host code (`main`, setup
helpers). State the kept code reads and something else sets (main, a setup helper, a set-up call
of the launcher itself, another file) would hold its initial value in the generated program, so
the baseline would compute something other than the user's program, and a candidate could match
that degenerate baseline (red team rounds 17-20: a blend weight left at 0, so copying the input
matched). The decision is made on the compiled file (tools.state_refs), where every spelling of a
variable is the same symbol:

- mutable state the kept code reaches (host variables, static locals, another file's variables,
  `__device__`/`__constant__` variables it uploads) is refused unless the user names it with
  `--keep-state` (a workspace the launcher caches for itself): init cannot tell who else sets it;
- every `__device__`/`__constant__` variable needs `--keep-state` too (kernels use them where the
  host object cannot see, and another file can set an exported one);
- device variables the dropped code names, kernels it launches in a file with device variables,
  and device, kernel or process settings it changes (`cudaDeviceSetLimit`, `cudaFuncSetAttribute`,
  `setenv`, ...) are refused;
- a kept launcher the compiled file does not contain (a template never instantiated there) is
  refused: nothing can be read about it.
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import InputError
from .program.init import InitResult
from .tools.nvcc import build_whole_object
from .tools.state_refs import StateReferences, generated, state_references
from .tools.symbols import bare_name


# Calls that change how the kept code runs without touching a variable of the file: device and
# kernel settings, the process environment, the C library's generators and modes (round 21: a
# device heap limit raised by main, and a setting passed through setenv).
_SETTINGS = re.compile(r"^(?:cudaDeviceSetLimit|cudaDeviceSetCacheConfig|cudaDeviceSetSharedMemConfig|cudaFuncSetAttribute"
                       r"|cudaFuncSetCacheConfig|cudaFuncSetSharedMemConfig|cudaSetDevice\w*|cudaDeviceSetMemPool"
                       r"|cudaCtxResetPersistingL2Cache|cudaStreamSetAttribute|cudaDeviceSetGraphMemAttribute|cuCtxSetLimit"
                       r"|setenv|putenv|unsetenv|clearenv|srand|srandom|srand48|seed48|setlocale|fesetround|fesetenv"
                       r"|fedisableexcept|feenableexcept"
                       # ways to reach any of those without importing it by name (round 22: dlsym and
                       # the driver entry point set the device heap limit)
                       r"|dlsym|dlvsym|dlopen|dlmopen|cudaGetDriverEntryPoint\w*|cuGetProcAddress\w*|cudaGetExportTable"
                       r"|cudaLibrary\w+|cuLibrary\w+|cuModule\w+)(?:_v\d+)?$")


_PROCESS_READS = re.compile(r"^(?:getenv|secure_getenv|rand|random|rand_r|drand48|lrand48|mrand48|time|clock|gettimeofday"
                            r"|clock_gettime|getpid|getuid|sysconf|getrandom|fopen\w*|open\w*|read\w*|fread\w*"
                            r"|\w*scanf\w*|fgets\w*|fgetc|getc\w*|getchar\w*|getline|getdelim|ifstream\w*|dlsym|dlvsym"
                            r"|cudaGetDriverEntryPoint\w*)$")


def _variable_name(readable: str) -> str:
    """A variable's name as a user writes it: `launch(float*, int)::alpha` -> `alpha`, `cfg::w` -> `cfg::w`."""
    return readable.rsplit(")::", 1)[-1]


def state_problems(refs: StateReferences, kept_names: set[str], keep_state: set[str] = frozenset(),
                   launcher: str | None = None) -> list[str]:
    """What makes the generated program's baseline differ from the user's program, one line each."""
    readable = refs.readable_names

    def launches(f: str) -> bool:  # a kernel's host-side wrapper: it calls the kernel's launch stub
        return "__device_stub__" not in f and any("__device_stub__" in c and c in refs.functions
                                                  for c in refs.edges.get(f, ()))

    kept_roots = {f for f in refs.functions if bare_name(readable.get(f, f)) in kept_names}
    problems: list[str] = []
    if launcher is not None and not any(bare_name(readable.get(f, f)) == launcher for f in kept_roots):
        problems.append(f"{launcher} is not in the compiled file (a template or inline function the file never "
                        "instantiates): init cannot read what it touches; instantiate it in the file")
    kept = refs.reach(kept_roots)
    for call in sorted(c for c in kept if _PROCESS_READS.match(c)):
        problems.append(f"the kept code calls {call}, whose result the generated program cannot reproduce "
                        "(the environment, a generator's state, the clock, input): pass the value as a launcher argument")
    # Device variables: kernels read and write them where the host object cannot see, a kept
    # kernel launched in a set-up call included (round 21), and another file can set an exported
    # one. Each is state the user must vouch for.
    for variable in sorted(refs.device_shadows):
        name = _variable_name(readable.get(variable, variable))
        if name not in keep_state and name.split("::")[-1] not in keep_state:
            problems.append(f"the kernels can read the device variable {name}: init cannot tell whether the code it "
                            f"leaves out (main, set-up calls, another file) sets it; --keep-state {name} if the "
                            "kernels own it")
    for variable in sorted(refs.state(kept) - refs.device_shadows):
        name = _variable_name(readable.get(variable, variable))
        if name in keep_state or name.split("::")[-1] in keep_state:
            continue
        where = "another file's variable" if variable in refs.external else "state that persists between calls"
        problems.append(f"the kept code reads {name}, {where}: init cannot tell whether the code it leaves out "
                        f"(main, set-up calls) sets it; make it a constant or a launcher argument, or "
                        f"--keep-state {name} if the launcher keeps it for itself (a cached workspace)")
    device_variables = sorted(_variable_name(readable.get(v, v)) for v in refs.device_shadows)
    kept_functions = kept & refs.functions
    for root in sorted(f for f in refs.functions - kept if not generated(f, readable.get(f)) and not launches(f)):
        reachable = refs.reach({root}, stop=kept_functions)
        setter = bare_name(readable.get(root, root))
        for call in sorted(c for c in reachable if _SETTINGS.match(c)):
            problems.append(f"{setter}() calls {call}, which changes how the kept code runs (a device limit, a "
                            "kernel attribute, the environment), and init runs none of that code: move it into the launcher")
        for variable in sorted(reachable & refs.device_shadows):
            problems.append(f"{setter}() can set the device variable {_variable_name(readable.get(variable, variable))}, "
                            "and init runs none of that code: upload it in the launcher")
        if device_variables:
            for wrapper in sorted(f for f in reachable if launches(f)):
                problems.append(f"{setter}() launches {bare_name(readable.get(wrapper, wrapper))}, which can write the "
                                f"device variables ({', '.join(device_variables[:3])}), and init runs none of that code: launch it from the "
                                "launcher")
    return list(dict.fromkeys(problems))


def refuse_state_set_by_dropped_code(source: str, result: InitResult, *, arch: str, cache_dir: Path,
                                     keep_state: list[str] | None = None) -> None:
    """Raise InputError when the generated program's baseline could differ from the user's program."""
    build = build_whole_object(source, arch=arch, cache_dir=cache_dir)
    if not build.ok or build.binary is None:
        first = next((ln for ln in build.log.splitlines() if "error" in ln), build.log.strip()[-200:])
        raise InputError(f"the file does not compile as it is ({first.strip()}): init reads its object to see what "
                         "the code it leaves out sets; give --include-dir for your headers")
    kept = {bare_name(n) for n in [result.launcher, result.kernel, *result.kernels] if n}
    problems = state_problems(state_references(build.binary), kept, set(keep_state or []),
                              launcher=bare_name(result.launcher) if result.launcher else None)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InputError(f"{problems[0]}{more} (the generated program could compute something other than yours)")
