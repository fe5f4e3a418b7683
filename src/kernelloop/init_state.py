"""init's guard: the generated program's baseline must compute what the user's program computes.

`init` keeps the user's launcher and kernels and drops the rest of the host code (`main`, setup
helpers). State the kept code reads and something else sets (main, a setup helper, a set-up call
of the launcher itself, another file) would hold its initial value in the generated program, so
the baseline would compute something other than the user's program, and a candidate could match
that degenerate baseline (red team rounds 17-27: a blend weight left at 0, so copying the input
matched). The decision is made on the compiled file (tools.state_refs), where every spelling of a
variable is the same symbol, read unoptimised and optimised as the real build is:

- mutable state the kept code reaches (host variables, static locals, another file's variables,
  `__device__`/`__constant__` variables it uploads) is refused unless the user names it with
  `--keep-state` (a workspace the launcher caches for itself): init cannot tell who else sets it;
- every `__device__`/`__constant__` variable needs `--keep-state` too (kernels use them where the
  host object cannot see, and another file can set an exported one), and so does device memory
  no host copy registers that device code may write (a `static` in device code, a string
  literal's storage: tools.ptx_writes; the kept kernels can reach it through data as well as by
  name), the device heap and launch limits kernels depend on, and weak definitions another file
  can replace;
- device variables the dropped code names, kernels it launches in a file with device variables,
  calls outside allow-lists by class (CUDA: memory, copies, streams, events, errors, queries;
  host: memory, strings, printing, files, math, clock, generators, exit, C++ runtime), however
  reached, and instructions that set the floating-point mode or call the system are refused, in
  `main`, its helpers and static initialisers alike (`--trust-call` to vouch for a call);
- a kept launcher the compiled file does not contain (a template never instantiated there) is
  refused: nothing can be read about it;
- every function and kernel of the generated editable unit, built as the verifier builds it,
  must compile to the same code as in the user's file (tools.code_identity): the copy may not
  change what any of it means (a `#if` block, a macro, an overload, lookup order).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError
from .program.init import KEEP_CALL_PREFIX, InitResult
from .program.cuda_tree import UNKNOWN_NAMES, declared_names
from .program.scanner import preprocessed
from .program.split import split_program
from .tools.nvcc import build_whole_object, compiler_error
from .tools.code_identity import device_fingerprints, host_fingerprints, unit_neutral
from .tools.inlined import inlined_into
from .tools.state_refs import StateReferences, generated, state_references
from .tools.symbols import bare_name, demangle


# What the code init leaves out may call of CUDA: memory, copies, streams, events, errors, device
# queries, launches (a kernel it launches is judged on its own below). Any other runtime or driver
# call may change how the kept code runs (a device heap limit, a kernel attribute, a context made
# current, a module loaded, a function looked up), so it is refused: an allow-list, because every
# CUDA release adds settings (round 21: a heap limit raised by main; round 22: the same through
# dlsym and the driver entry point).
_CUDA_CALL = re.compile(r"^cuda[A-Z]|^cu[A-Z]")
_CUDA_CALLS_LEFT_OUT_CODE_MAY_MAKE = re.compile(
    r"^(?:cuda(?:Malloc\w*|Free\w*|Memcpy\w*|Memset\w*|HostAlloc|HostRegister|HostUnregister|HostGetDevicePointer"
    r"|HostGetFlags|DeviceSynchronize|ThreadSynchronize|StreamSynchronize|StreamCreate\w*|StreamDestroy|StreamQuery"
    r"|StreamWaitEvent|StreamGet\w+|Event(?:Create\w*|Record\w*|Synchronize|Query|ElapsedTime\w*|Destroy)"
    r"|GetLastError|PeekAtLastError|GetErrorString|GetErrorName|GetDevice|GetDeviceCount|GetDeviceProperties\w*"
    r"|DeviceGetAttribute|DeviceGetLimit|DeviceGetCacheConfig|DeviceGetPCIBusId|DeviceGetByPCIBusId|DeviceCanAccessPeer"
    r"|SetDevice|ChooseDevice\w*|DeviceReset|ThreadExit|RuntimeGetVersion|DriverGetVersion|MemGetInfo"
    r"|PointerGetAttributes|ProfilerStart|ProfilerStop|MemPrefetchAsync\w*|MemAdvise\w*|Occupancy\w+"
    r"|FuncGetAttributes|LaunchKernel|DeviceGetStreamPriorityRange"
    # how the host thread waits for the device (spin, yield, block): the kept code cannot read it
    # back (cudaGetDeviceFlags is a process read below), and no result depends on it (round 315)
    r"|SetDeviceFlags)"
    r"|cu(?:Init|DriverGetVersion|DeviceGet\w*|DeviceTotalMem\w*|DeviceComputeCapability|GetErrorString|GetErrorName"
    r"|MemAlloc\w*|MemFree\w*|Memcpy\w*|Memset\w*|MemGetInfo\w*|CtxSynchronize|CtxGetDevice|StreamSynchronize))"
    r"(?:_v\d+)?(?:_ptsz|_ptds)?$")

# What the code init leaves out may call besides CUDA, by class: memory and strings, printing and
# files, math, the clock and generators, exit and the C++ runtime, CUDA's math libraries. Anything
# else (a signal handler that edits the saved floating-point mode, a thread, setenv, setlocale,
# fesetround, a lookup by name) is refused unless the user vouches for it with --trust-call: an
# allow-list, because each deny-list so far was passed by a call not on it (rounds 21-23).
_HOST_CALLS_LEFT_OUT_CODE_MAY_MAKE = re.compile(
    # memory, strings, conversions
    r"^(?:malloc|calloc|realloc|free|aligned_alloc|posix_memalign|memalign|mem(?:cpy|move|set|cmp|chr)|str[a-z]*"
    r"|wcs[a-z]*|ato[filq]+|to(?:upper|lower)|is(?:alpha|digit|space|upper|lower|alnum|print|punct|xdigit)|qsort|bsearch"
    r"|abs|labs|llabs|div|ldiv|__errno_location|__ctype_\w+|__\w+_chk"
    # printing, files, arguments
    r"|v?[fsd]?n?printf|puts|fputs|putchar|fputc|putc|fwrite|fflush|perror|fopen(?:64)?|fclose|fread|fgets|fgetc|getc"
    r"|getchar|v?[fs]?scanf|__isoc\d+_v?[fs]?scanf|fseeko?(?:64)?|ftello?(?:64)?|rewind|feof|ferror|clearerr|remove"
    r"|rename|getline|getdelim|setvbuf|setbuf|getopt\w*|stdin|stdout|stderr|optarg|optind|opterr|optopt"
    # math (reading the rounding mode, never setting it)
    r"|a?(?:sin|cos|tan)h?f?|atan2f?|exp(?:2|m1)?f?|log(?:2|10|1p)?f?|powf?|sqrtf?|cbrtf?|fabsf?|floorf?|ceilf?"
    r"|l{0,2}roundf?|truncf?|l{0,2}rintf?|nearbyintf?|fmodf?|remainderf?|fmaxf?|fminf?|fmaf?|hypotf?|erfc?f?"
    r"|[tl]gammaf?|ldexpf?|frexpf?|modff?|copysignf?|nanf?|__(?:finite|isnan|isinf)\w*"
    # (libstdc++'s uniform and normal distributions step to the next float: red team round 310)
    r"|nextafterf?|nexttowardf?"
    # what the compiler calls for plain arithmetic: sinf and cosf of one value merged, libgcc's bit
    # counts, wide divisions and complex products (`__builtin_popcount` is `__popcountdi2`)
    r"|sincosf?|exp10f?|scalbl?nf?|ilogbf?|logbf?|fdimf?|__(?:popcount|clz|ctz|ffs|parity|bswap)[sdt]i2"
    r"|__(?:u?div|u?mod|mul)[sdt]i3|__(?:mul|div)[sdxt]c3|__powi[sdx]f2"
    # the clock, generators, the environment read
    r"|time|clock|gettimeofday|clock_gettime|difftime|localtime\w*|gmtime\w*|strftime|[sl]?rand(?:om|_r)?|[dsejmnl]?rand48"
    r"|seed48|srandom|getpid|usleep|sleep|nanosleep|sched_yield|getenv|secure_getenv"
    # exit and the C++ runtime
    r"|exit|_exit|_Exit|abort|atexit|__assert_fail|__stack_chk_fail|__cxa_\w+|_Unwind_\w+|__gxx_personality_v0"
    r"|__dso_handle|_Zn[wa]\w*|_Zd[la]\w*|_ZT[VIS]\w*|_ZSt\d+__throw_\w+|_ZSt(?:4cout|4cerr|4clog|3cin)"
    r"|_ZNS[oi]\w*|_ZNKS[oi]\w*|_ZSt(?:ls|rs)I\w*|_ZSt16__ostream_insert\w*|_ZNSt8ios_base4Init\w*"
    r"|_ZNSaIcE[CD][12]Ev|_ZNS[ti]9basic_ios\w*|_ZNKSt9basic_ios\w*|_ZNKSt5ctypeIcE\w*|_ZSt16__throw_bad_cast\w*|_ZNSt7__cxx11\w*"
    r"|_ZNKSt7__cxx11\w*|_ZNSt(?:14basic_ifstream|14basic_ofstream|13basic_fstream|15basic_streambuf|13basic_filebuf)\w*"
    r"|_ZNSt6chrono\w*_clock3nowEv|_ZNSt13random_device\w*|_ZSt(?:18|17|28|29)_Rb_tree\w*|_ZNSt8__detail\w*"
    # the standard exception classes a `throw` on an error makes and destroys (their own object only)
    r"|_ZNK?St(?:9exception|9bad_alloc|20bad_array_new_length|8bad_cast|10bad_typeid|13runtime_error|11logic_error"
    r"|16invalid_argument|12out_of_range|12length_error|12domain_error|11range_error|14overflow_error"
    r"|15underflow_error)\w*"
    # CUDA's compiler-generated registration and launch calls; its math libraries and markers
    r"|__cuda\w+|(?:cublas|cublasLt|curand|cufft|cusparse|cusolver|nvtx)\w*)$")


def left_out_call_allowed(name: str) -> bool:
    """Whether the code init leaves out may make this call without changing how the kept code runs."""
    if _CUDA_CALL.match(name):
        return bool(_CUDA_CALLS_LEFT_OUT_CODE_MAY_MAKE.match(name))
    # glibc redirects some calls to their ISO C23 (C99) forms under another name (`atoi` and
    # `strtol` become `__isoc23_strtol` with glibc 2.38+, as on the lent H200's Ubuntu): the same call
    return bool(_HOST_CALLS_LEFT_OUT_CODE_MAY_MAKE.match(re.sub(r"^__isoc\d+_", "", name)))


_PROCESS_READS = re.compile(r"^(?:getenv|secure_getenv|rand|random|rand_r|drand48|lrand48|mrand48|time|clock|gettimeofday"
                            r"|clock_gettime|getpid|getuid|sysconf|getrandom|fopen\w*|open\w*|read\w*|fread\w*"
                            r"|\w*scanf\w*|fgets\w*|fgetc|getc\w*|getchar\w*|getline|getdelim|ifstream\w*|dlsym|dlvsym"
                            r"|cudaGetDriverEntryPoint\w*"
                            # how much device memory is free: what main allocated first decides (red team round 307)
                            r"|cudaMemGetInfo\w*|cuMemGetInfo\w*"
                            # the device flags the code init leaves out may set (red team round 315)
                            r"|cudaGetDeviceFlags\w*|cuCtxGetFlags\w*|cuDevicePrimaryCtxGetState\w*)$")


# nvcc's registration of the file's kernels, run before main in every CUDA program alike
_REGISTRATION = re.compile(r"^(?:_ZL\d+)?__sti____cudaRegisterAll\w*$")


def _is_kernel_wrapper(refs: StateReferences, f: str) -> bool:
    """A kernel's host-side wrapper (it calls the kernel's launch stub): the kernel's own name on the host."""
    return any("__device_stub__" in c and c in refs.functions for c in refs.edges.get(f, ()))


_STATIC_INIT = re.compile(r"^(?:_GLOBAL__sub_I|__cxx_global_var_init|(?:_Z\d+)?__static_initialization_and_destruction)")


# Device settings a kernel's result can depend on without failing: device malloc returns NULL past
# the heap limit, and a device-side launch fails past the pending-launch limit, so a kernel can
# fall back to other work (round 23: a filter that passes its input through when malloc fails,
# with the heap raised in main). The program may set them where init cannot see (another file).
_DEVICE_SETTINGS = {
    "device-heap": ({"malloc", "_Znwm", "_Znam", "__nv_aligned_device_malloc"},
                    "allocate from the device heap (malloc or new in a kernel), which succeeds or not by the heap "
                    "limit (8 MiB unless the program raises it)"),
    "device-launches": ({"cudaLaunchDevice", "cudaLaunchDeviceV2", "cudaGetParameterBuffer",
                         "cudaGetParameterBufferV2"},
                        "launch kernels from the device (dynamic parallelism), which succeeds or not by the "
                        "pending-launch limit"),
}


def _variable_name(readable: str) -> str:
    """A variable's name as a user writes it: `launch(float*, int)::alpha` -> `alpha`, `cfg::w` -> `cfg::w`."""
    return readable.rsplit(")::", 1)[-1]


def state_problems(refs: StateReferences, kept_names: set[str], keep_state: set[str] = frozenset(),
                   launcher: str | None = None, trusted: set[str] = frozenset(),
                   kept_symbols: set[str] | None = None) -> list[str]:
    """What makes the generated program's baseline differ from the user's program, one line each.
    KEPT_SYMBOLS: the host functions the generated program defines, where known; a function of a kept
    name that it does not define (another overload of the launcher, a `ref::scale` CPU reference) is
    left-out code, judged as such (red team round 309: an overload that set flush-to-zero and called
    the launcher counted as kept by its name, so nothing judged it)."""
    readable = refs.readable_names

    def launches(f: str) -> bool:  # a kernel's host-side wrapper: it calls the kernel's launch stub
        return "__device_stub__" not in f and _is_kernel_wrapper(refs, f)

    kept_roots = {f for f in refs.functions if bare_name(readable.get(f, f)) in kept_names
                  and (kept_symbols is None or f in kept_symbols or bare_name(readable.get(f, f)).startswith(KEEP_CALL_PREFIX)
                       or "__device_stub__" in f or _is_kernel_wrapper(refs, f))}
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
    device_functions = sorted(refs.device_edges)
    kept_kernels = {f for f, readable_name in zip(device_functions, demangle(device_functions))
                    if bare_name(readable_name) in kept_names}
    device_reach, todo = set(), list(kept_kernels)
    while todo:
        name = todo.pop()
        if name not in device_reach:
            device_reach.add(name)
            todo += [t for t in refs.device_edges.get(name, ()) if t in refs.device_edges]
    used = set().union(*(refs.device_edges[f] for f in device_reach)) if device_reach else set()
    # Device memory no host copy registers that device code writes (a `static` variable of device
    # code, a string literal's storage): kept between launches like a device variable, with no host
    # shadow to name it (red team round 310: a gain a calibration kernel sets, a table the first
    # launch builds); state wherever it is, since the kept kernels can reach it through data as well
    # as by name (red team round 311: a table of pointers to it, a table of device functions).
    for variable in sorted(refs.device_statics):
        name = readable.get(variable, variable)
        if _variable_name(name) not in keep_state:
            # nvcc's names for a string literal's storage (`$str$2`, `__unnamed_1` for `__func__`)
            where = (f"a string literal's storage ({name}: its address kept in memory, printf's `%s` in a module "
                     "that also reads local memory or loads through pointers it loaded among the ways)"
                     if re.match(r"^(?:\$str|__unnamed_)", name) else name)
            problems.append(f"the kernels keep state in {where}, device memory that device code writes and no host "
                            "copy registers (a static variable of device code, a string literal's storage), which "
                            "lasts from one launch to the next: init cannot tell whether the code it leaves out (main, "
                            f"set-up calls) launches what sets it; --keep-state {_variable_name(name)} if the kernels "
                            "own it")
    for setting, (names, what) in _DEVICE_SETTINGS.items():
        if used & names and setting not in keep_state:
            problems.append(f"the kernels {what}: init cannot tell whether your program changes that limit in the "
                            f"code it leaves out or another file; --keep-state {setting} if it leaves it as it is")
    for symbol in sorted(kept & refs.replaceable):
        name = _variable_name(readable.get(symbol, symbol))
        if name not in keep_state and name.split("::")[-1].split("(")[0] not in keep_state:
            problems.append(f"the kept code uses {name}, a weak definition that another file of your program can "
                            "replace when it links: init cannot tell which one your program runs; make it a plain "
                            f"definition, or --keep-state {name.split('(')[0]} if this file's is the one")
    for variable in sorted(refs.state(kept) - refs.device_shadows):
        name = _variable_name(readable.get(variable, variable))
        if name in keep_state or name.split("::")[-1] in keep_state:
            continue
        where = "another file's variable" if variable in refs.external else "state that persists between calls"
        problems.append(f"the kept code reads {name}, {where}: init cannot tell whether the code it leaves out "
                        f"(main, set-up calls) sets it; make it a constant or a launcher argument, or "
                        f"--keep-state {name} if the launcher keeps it for itself (a cached workspace)")
    device_variables = sorted(_variable_name(readable.get(v, v)) for v in refs.device_shadows | refs.device_statics)
    kept_functions = kept & refs.functions
    # Static initialisers are the compiler's functions but run the user's expressions before main.
    # and a function the loader runs before main whatever its name (`__attribute__((constructor))` on a
    # name the compiler's look like: red team round 309), but CUDA's own registration
    left_out = {f for f in refs.functions - kept if (not generated(f, readable.get(f)) or _STATIC_INIT.match(f)
                                                     or (f in refs.runs_at_start and not _REGISTRATION.match(f)))
                and not launches(f)}
    for root in sorted(left_out):
        reachable = refs.reach({root}, stop=kept_functions)
        setter = "a file-scope initialiser" if _STATIC_INIT.match(root) else f"{bare_name(readable.get(root, root))}()"
        for call in sorted(c for c in reachable & refs.imports if not left_out_call_allowed(c) and c not in trusted):
            what = ("a CUDA call that can change how the kept code runs (init lets the code it leaves out allocate, "
                    "copy, synchronize, time and query, nothing else)" if _CUDA_CALL.match(call) else
                    "which init does not know to leave the kept code as it is (it knows memory, strings, printing, "
                    "files, math, the clock, generators, exit and the C++ runtime)")
            problems.append(f"{setter} calls {readable.get(call, call)}, {what}, and init runs none of that "
                            f"code: move it into the launcher, or --trust-call {call} if it cannot change what the "
                            "launcher and kernels compute")
        for function in sorted(reachable & refs.functions):
            for instruction in sorted(refs.control_instructions.get(function, ())):
                problems.append(f"{setter} runs a `{instruction}` instruction (the floating-point mode, a system "
                                "call), which can change how the kept code runs, and init runs none of that code: "
                                "move it into the launcher")
        for variable in sorted(reachable & refs.device_shadows):
            problems.append(f"{setter} can set the device variable {_variable_name(readable.get(variable, variable))}, "
                            "and init runs none of that code: upload it in the launcher")
        if device_variables:
            for wrapper in sorted(f for f in reachable if launches(f)):
                problems.append(f"{setter} launches {bare_name(readable.get(wrapper, wrapper))}, which can write the "
                                f"device variables ({', '.join(device_variables[:3])}), and init runs none of that code: launch it from the "
                                "launcher")
    return list(dict.fromkeys(problems))


# Macros that name a place in the source or the moment of the build: the generated program puts
# the kept code on other lines, so they are made equal before the kept code is compared.
_POSITION_MACROS = re.compile(r"\b(?:__LINE__|__COUNTER__|__FILE__|__FILE_NAME__|__BASE_FILE__|__DATE__|__TIME__"
                              r"|__TIMESTAMP__)\b")


# `assert` from <cassert> expands its own __FILE__ and __LINE__ (in a system header, out of reach of
# the text above): in the comparison only, it is spelled without them. Its condition is still
# evaluated, with its side effects, and still stops the program when false.
_ASSERT_CALL = re.compile(r"(?<![\w.:>])assert\s*\(")
_POSITIONLESS_ASSERT = ("static __host__ __device__ inline void kl_positionless_assert_failed() {\n"
                        "#ifdef __CUDA_ARCH__\n  __trap();\n#else\n  __builtin_trap();\n#endif\n}\n"
                        "#define kl_positionless_assert(e) ((e) ? (void)0 : kl_positionless_assert_failed())\n")
# the program's own `assert`: a macro defined or undefined (`%:` is `#`), read with continued lines
# joined and comments out (`#undef \` on one line, `assert` on the next: red team round 93), or any
# declaration the parser finds (`void (assert)(float&, int)`), or a function declared with a type
# before its name (`return assert(...)` counts too: then nothing is replaced)
_OWN_ASSERT = re.compile(r"(?:#|%:)\s*(?:define|undef)\s+assert\b|(?<![\w.:>])[A-Za-z_][\w:<>]*[\s*&]+\(?\s*assert\s*\)?\s*\(")


# what can switch `assert` off or change it at some place and not another: NDEBUG (a user file may
# define it anywhere, even inside a `main` that init leaves out, and include <assert.h> again: red
# team round 94), and any directive but an #include that names assert (push_macro, #if defined),
# less a macro of another name whose body only calls assert (`#define CUDA_OK(x) assert(x == 0)`,
# kept-aside set 7): that uses <cassert>'s, as code does, and its calls get the stand-in too
_NDEBUG = re.compile(r"\bNDEBUG\b")
_DIRECTIVE_NAMING_ASSERT = re.compile(r"^[ \t]*(?:#|%:)[ \t]*(?!include\b)(\w+)[ \t]*(\w*)([^\n]*\bassert\b[^\n]*)$",
                                      re.M)


def _changes_assert(directive: re.Match[str]) -> bool:
    kind, name, rest = directive.groups()
    if kind != "define" or name == "assert" or name == "":
        return True
    return any(not re.match(r"\s*\(", rest[m.end():]) for m in re.finditer(r"\bassert\b", rest))


def _defines_assert(text: str) -> bool:
    """Whether `assert` may mean anything but <cassert>'s, switched on, at some use: then it is
    compared as written (its positions included), never through the positionless stand-in."""
    joined = preprocessed(text)
    return bool(_OWN_ASSERT.search(joined) or _NDEBUG.search(joined)
                or any(_changes_assert(m) for m in _DIRECTIVE_NAMING_ASSERT.finditer(joined))) \
        or "assert" in declared_names(joined)


# The probe build: in device code each position macro reads a device variable, so a kernel whose
# code depends on its position in any way (`__LINE__ / 16`, which two stand-in values cannot tell
# apart: red team round 95) compiles to other code than with the constants; host code keeps them.
# A file name reads as a 4096-byte device array whose bytes the compiler cannot know (its size as
# well as its bytes show; not volatile, so host code that passes `__FILE__` to a `const char*`, as
# error checks do, still compiles); a test of its exact length (`sizeof(__FILE__) == 37`) gives
# the same code both ways and is not caught.
_POSITION_PROBES = ("__device__ volatile int kl_position_probe_line;\n"
                    "__device__ char kl_position_probe_file[4096];\n#ifdef __CUDA_ARCH__\n"
                    "#define KL_POSITION_PROBE_LINE (kl_position_probe_line)\n"
                    "#define KL_POSITION_PROBE_FILE (kl_position_probe_file)\n#else\n"
                    "#define KL_POSITION_PROBE_LINE 0\n#define KL_POSITION_PROBE_FILE \"\"\n#endif\n")


def _without_positions(source: str, line: str = "0", file: str = '""') -> str:
    """SOURCE with the positions it spells made equal: the position macros, and `assert`'s own
    (unless the program defines an `assert` of its own). Positions reached any other way
    (`__builtin_LINE()`, `std::source_location`) stay, so code that computes with them compiles
    differently where the copy moved it, and is refused (red team round 92)."""
    text = _POSITION_MACROS.sub(lambda m: line if m.group(0) in ("__LINE__", "__COUNTER__") else file, source)
    if _ASSERT_CALL.search(text) and not _defines_assert(text):
        text = _POSITIONLESS_ASSERT + _ASSERT_CALL.sub("kl_positionless_assert(", text)
    return text


def _object(source: str, *, arch: str, cache_dir: Path, optimised: bool, what: str,
            extra_flags: tuple[str, ...] = ()) -> Path:
    build = build_whole_object(source, arch=arch, cache_dir=cache_dir, optimised=optimised, extra_flags=extra_flags)
    if not build.ok or build.binary is None:
        raise InputError(f"{what} does not compile as it is ({compiler_error(build.log)}): init reads its object to see what "
                         "the code it leaves out sets; give --include-dir for your headers")
    return build.binary


def refuse_state_set_by_dropped_code(source: str, result: InitResult, *, arch: str, cache_dir: Path,
                                     keep_state: list[str] | None = None, trust_calls: list[str] | None = None,
                                     generated: str | None = None) -> None:
    """Raise InputError when the generated program's baseline could differ from the user's program:
    state or settings the left-out code changes (read from the file's object unoptimised, and
    optimised as the real build is, since the source can tell the two apart), and, given the
    generated program's text, kept code that compiles differently there (a `#if` region the copy
    lost, a macro, an overload beside it)."""
    kept = {bare_name(n) for n in [result.launcher, result.kernel, *result.kernels] if n}
    if result.keep_call is not None and result.launcher is not None:
        # the launcher called as the generated program calls it: an inline (header-only) or template launcher the
        # file never calls is compiled then, and read with what it reaches
        source = f"{source}\n{result.keep_call}\n"
        kept.add(f"{KEEP_CALL_PREFIX}{bare_name(result.launcher)}")
    plain = state_references(_object(source, arch=arch, cache_dir=cache_dir, optimised=False, what="the file"))
    optimised_object = _object(_without_positions(source), arch=arch, cache_dir=cache_dir, optimised=True,
                               what="the file")
    optimised = state_references(optimised_object)
    units = _generated_units(generated, arch=arch, cache_dir=cache_dir) if generated is not None else None
    kept_symbols = set().union(*(reading.refs.functions for _, reading in units)) if units is not None else None
    problems = state_problems(plain, kept, set(keep_state or []),
                              launcher=bare_name(result.launcher) if result.launcher else None,
                              trusted=set(trust_calls or []), kept_symbols=kept_symbols)
    problems += state_problems(optimised, kept, set(keep_state or []), trusted=set(trust_calls or []),
                               kept_symbols=kept_symbols)
    if generated is not None and units is not None:
        problems += _kept_code_differences(source, generated, arch=arch, cache_dir=cache_dir)
        problems += _device_code_reading_positions(source, optimised_object, optimised, arch=arch, cache_dir=cache_dir)
        problems += _build_setup_differences(source, optimised_object, optimised, kept, arch=arch, cache_dir=cache_dir)
        problems += _code_your_file_never_ran(source, units, kept, arch=arch, cache_dir=cache_dir,
                                              trusted=set(trust_calls or []))
    problems = list(dict.fromkeys(problems))
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InputError(f"{problems[0]}{more} (the generated program could compute something other than yours)")


def _generated_units(program_text: str, *, arch: str, cache_dir: Path) -> list[tuple[str, _Reading]]:
    """The generated program's two units, each built as check (c) builds them (`_COMPARED_BUILD`: every
    function out of line, an inline launcher the harness's call would otherwise absorb) and read once:
    the host functions they define are the kept ones, and what they run is compared with the file's."""
    split = split_program(program_text, "generated.cu")
    return [(what, _reading(_without_positions(unit), arch=arch, cache_dir=cache_dir,
                            what=f"the generated program's {what}"))
            for unit, what in ((split.editable_unit(), "editable part"), (split.harness_unit(), "harness"))]


def _device_code_reading_positions(source: str, user_object: Path, user_refs: StateReferences, *, arch: str,
                                   cache_dir: Path) -> list[str]:
    """The kernels whose code changes with the positions the source spells (`__LINE__` used as a
    value): the comparison made those equal, but the copy sits on other lines, so it would compute
    otherwise (red team rounds 92, 95). Found by building the file again with every position in
    device code read from a device variable. Host code is not probed: a launcher's error checks
    pass `__FILE__` and `__LINE__` to a message."""
    probed = _POSITION_PROBES + _without_positions(source, "KL_POSITION_PROBE_LINE", "KL_POSITION_PROBE_FILE")
    build = build_whole_object(probed, arch=arch, cache_dir=cache_dir, optimised=True)
    if not build.ok or build.binary is None:
        return ["a kernel uses __LINE__, __FILE__ or __COUNTER__ where a constant is needed, so init cannot tell "
                "whether the generated program, which puts it on other lines, computes the same: write the value "
                "as a number"]
    # and the file once more, as written, under another name: a file name reached without spelling
    # `__FILE__` (pasted with `##`, `__builtin_FILE()`) shows too (red team round 96)
    # (the shortest name and a long one: a test of the name's length against any bound between them)
    renamed = [build_whole_object(_without_positions(source), arch=arch, cache_dir=cache_dir, optimised=True,
                                  filename=name) for name in ("a.cu", "z" * 120 + ".cu")]
    if not all(b.ok and b.binary is not None for b in renamed):
        return ["your file does not compile under another file name, so init cannot tell whether the generated "
                "program computes the same: keep the kernels from reading the file's name"]
    device = {unit_neutral(k) for k in user_refs.device_edges}
    here = device_fingerprints(user_object.with_name("program.ptx").read_text(), device)
    changed: set[str] = set()
    for other in (build.binary, *(b.binary for b in renamed)):
        there = device_fingerprints(other.with_name("program.ptx").read_text(), device)
        changed |= {name for name in here if name in there and here[name] != there[name]}
    changed = sorted(changed)
    return [f"{bare_name(readable)} computes with its own position in the file (its line or file name, in device "
            "code), and the generated program puts it on other lines of another file: write the value as a number"
            for readable in demangle(changed)]


def _build_setup_differences(source: str, user_object: Path, user_refs: StateReferences, kept: set[str], *,
                             arch: str, cache_dir: Path) -> list[str]:
    """The kept kernels and launcher (and all they reach) that compile to other code in kernelloop's
    build setup than in a plain build of the file: every comparison above is made in kernelloop's
    setup (-std=c++17, its harness header beside the file and on the include path), where the user
    builds with nvcc's defaults. Code that can tell the two apart (`__has_include` of a kernelloop
    header, `__STRICT_ANSI__`, a library trait that differs by dialect) would make the generated
    baseline compute something other than the user's build does (red team round 97); the compiler
    decides, whatever the spelling."""
    # both builds without the C library's fortified wrappers, which lower a print per dialect (tools/nvcc.py)
    plain = build_whole_object(_without_positions(source), arch=arch, cache_dir=cache_dir, optimised=True,
                               iso_dialect=False, harness_visible=False)
    user_object = _object(_without_positions(source), arch=arch, cache_dir=cache_dir, optimised=True,
                          what="the file")
    if not plain.ok or plain.binary is None:
        return [f"your file does not compile in a plain build (nvcc -O3, its default C++ dialect, no kernelloop "
                f"headers: {compiler_error(plain.log)}) but does in kernelloop's, so the generated program would "
                "not compute what your build does: keep the code from testing how it is built"]
    plain_refs = state_references(plain.binary)
    hosts = {f for f in user_refs.functions & plain_refs.functions
             if bare_name(user_refs.readable_names.get(f, f)) in kept}
    device = {unit_neutral(k) for k in user_refs.device_edges}
    ours, theirs = host_fingerprints(user_object, hosts), host_fingerprints(plain.binary, hosts)
    ours.update(device_fingerprints(user_object.with_name("program.ptx").read_text(), device))
    theirs.update(device_fingerprints(plain.binary.with_name("program.ptx").read_text(), device))
    changed = sorted(name for name in ours if theirs.get(name) != ours[name])
    return [f"{bare_name(readable)} compiles to other code in kernelloop's build (-std=c++17, its headers on the "
            "include path) than in a plain nvcc build of your file (a test of the dialect, of __STRICT_ANSI__ or "
            "of __has_include): the generated program would not compute what your build does; make the code "
            "the same in every build"
            for readable in demangle(changed)]


# The harness's own start-up code, which every generated program runs besides the user's
# (its calls as a generated program makes them, for a few element types: the templates they instantiate)
_HARNESS_ALONE = """#include <cstdio>
#include <vector>
#include <kernelloop_harness.cuh>
int main() {
  kl::Harness h;
  float* f = h.inout<float>("f", (size_t)(64), kl::Uniform<float>{-1.0f, 1.0f});
  const float* g = h.input<float>("g", (size_t)(64), kl::Uniform<float>{-1.0f, 1.0f});
  double* d = h.inout<double>("d", (size_t)(64), kl::Uniform<double>{-1.0, 1.0});
  int* i = h.inout<int>("i", (size_t)(64), kl::Uniform<int>{0, 9});
  h.run([&] { (void)f; (void)g; (void)d; (void)i; }, {.warmup = 2, .calls = 20, .flops = 0.0});
  std::vector<float> vf = h.fetch(f);
  std::vector<double> vd = h.fetch(d);
  std::vector<int> vi = h.fetch(i);
  printf("%g %g %d\\n", (double)vf[0], vd[0], vi[0]);
  return 0;
}
"""

# How check (c) below builds what it compares: with debug information, which names what was inlined
# (GCC's -g changes no code), and no inlining but the forced kind, so that a library function is
# inlined into the user's helper in both builds or in neither (a std::vector constructor the harness
# also calls elsewhere was left out of line in the generated unit only, and the helper compared unequal)
_COMPARED_BUILD = ("-g", "-Xcompiler", "-fno-inline")


@dataclass(frozen=True)
class _Reading:
    """A unit as check (c) compares it: its object and references, and what its start-up code (the
    file-scope initialisers) reaches: the symbols of other files and libraries it calls or refers
    to, the functions the compiler inlined into it, whether it addresses thread-local memory."""

    obj: Path
    refs: StateReferences
    startup_imports: frozenset[str]
    startup_inlined: frozenset[str]
    startup_thread_memory: bool


def _reading(source: str, *, arch: str, cache_dir: Path, what: str) -> _Reading:
    obj = _object(source, arch=arch, cache_dir=cache_dir, optimised=True, what=what, extra_flags=_COMPARED_BUILD)
    refs = state_references(obj)
    reached = refs.reach({f for f in refs.functions if _STATIC_INIT.match(f)}
                         | {f for f in refs.runs_at_start if not _REGISTRATION.match(f)})
    inlined = inlined_into(obj, lambda symbol: bool(_STATIC_INIT.match(symbol)) or symbol in reached)
    return _Reading(obj=obj, refs=refs, startup_imports=frozenset(reached & refs.imports),
                    startup_inlined=frozenset(n for names in inlined.values() for n in names),
                    startup_thread_memory=bool(reached & refs.thread_memory))


def _startup_differences(unit: _Reading, users: _Reading, harness: _Reading, what: str) -> list[str]:
    """Start-up code the generated unit runs and neither the user's file nor the harness does
    (red team round 308: a template, inlined into a file-scope initialiser that had called a
    left-out overload, set the C library's character classes; a statement expression a left-out
    #define had switched on). Compared on what the code can reach outside its own variables, which
    is all that can change what the kept code or the harness computes (the variables' own values
    are state the kept code may not read unless constant): another file's or a library's functions
    and data, inlined code, thread-local memory."""
    tail = ("code init leaves out (main, a launcher, a caller, a #define in them) changes what the file's start-up "
            "code means; wrap the kernel alone (--kernel) or keep file-scope initialisers independent of it")
    problems = [f"the generated program's {what} reaches {unit.refs.readable_names.get(name, name)} from its start-up "
                f"code, which your file's start-up code does not: {tail}"
                for name in sorted(unit.startup_imports - users.startup_imports - harness.startup_imports)]
    problems += [f"the generated program's {what} inlines {name} into its start-up code, which your file's start-up "
                 f"code does not: {tail}"
                 for name in sorted(unit.startup_inlined - users.startup_inlined - harness.startup_inlined)]
    if unit.startup_thread_memory and not (users.startup_thread_memory or harness.startup_thread_memory):
        problems.append(f"the generated program's {what} addresses thread-local memory (%fs) in its start-up code, "
                        f"which your file's start-up code does not: {tail}")
    return problems


# Functions the generated program's units define that are not the user's: the harness's own, and
# the C++ and CUDA libraries' (a `main` of the user's is left out: the one there, its cold part and
# its lambdas are the harness's)
_NOT_THE_USERS = re.compile(r"^(?:std::|__gnu_cxx::|__cxxabiv1::|kl::|main(?:$|::|\.))")


def _qualified_name(readable: str) -> str:
    """A demangled function's qualified name, without its return type, template arguments' insides
    aside: `float const& std::max<float>(float const&, float const&)` -> `std::max<float>`."""
    depth, words, word = 0, [], ""
    for ch in readable:
        if ch == "(" and depth == 0:
            break
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == " " and depth == 0:
            words.append(word)
            word = ""
        else:
            word += ch
    return (word or (words[-1] if words else "")).strip()


def _code_your_file_never_ran(source: str, units: list[tuple[str, _Reading]], kept: set[str], *, arch: str,
                              cache_dir: Path, trusted: set[str]) -> list[str]:
    """Code of the user's that the generated program compiles and the user's file does not, or
    compiles otherwise, in either of its units (as the verifier builds them); and start-up code there
    that the user's file does not run. Init leaves code out (main, launchers it does not wrap, their
    callers), and what stays can then mean another definition: a call in a file-scope initialiser
    that named a left-out function now picks another overload, a function template or the primary
    template of a left-out specialisation, or an inline function the file never called, or a
    `#define` in left-out code no longer hides an `#ifndef` block (red team round 307: each set
    flush-to-zero at start-up, and the baseline computed zeros; round 308: the same inlined, where no
    function of the user's is left to compare). Every function the units define under a name the
    file declares must be the file's own, compiled to the same code; the kept launcher and kernels
    aside (a template init instantiates is compiled there first: _kept_code_differences compares
    what both hold). Start-up code may reach only what the file's own start-up code or the harness's
    reaches, and is judged as init judges the code it leaves out too (its calls by class, no
    floating-point mode set)."""
    declared = declared_names(preprocessed(source))
    users = _reading(_without_positions(source), arch=arch, cache_dir=cache_dir, what="the file")
    harness = _reading(_HARNESS_ALONE, arch=arch, cache_dir=cache_dir, what="the harness alone")
    problems: list[str] = []
    startup_problems: list[str] = []
    for what, reading in units:
        refs = reading.refs
        startup = refs.reach({f for f in refs.functions if _STATIC_INIT.match(f)})
        for call in sorted(c for c in startup & refs.imports if not left_out_call_allowed(c) and c not in trusted):
            problems.append(f"the generated program's {what} calls {refs.readable_names.get(call, call)} at start-up, "
                            "which your file's start-up code does not call like this: code init leaves out changes what "
                            "the rest means (a #define, an overload); wrap the kernel alone (--kernel), or --trust-call "
                            f"{call} if it cannot change what the launcher and kernels compute")
        for function in sorted(f for f, found in refs.control_instructions.items() if found):
            problems.append(f"the generated program's {what} runs a `{sorted(refs.control_instructions[function])[0]}` "
                            f"instruction in {refs.readable_names.get(function, function)} (the floating-point mode, a "
                            "system call), which your file does not run there: code init leaves out changes what the "
                            "rest means (a #define, an overload); wrap the kernel alone (--kernel) or keep such code "
                            "out of the file")
        theirs_names = set()
        for f in refs.functions:
            readable = refs.readable_names.get(f, f)
            if generated(f, readable) or _NOT_THE_USERS.match(_qualified_name(readable)):
                continue
            last = bare_name(readable).lstrip("~")
            if last in kept or last.startswith(KEEP_CALL_PREFIX):
                continue
            if last in declared or UNKNOWN_NAMES in declared:
                theirs_names.add(f)
        theirs = host_fingerprints(reading.obj, theirs_names)
        # the harness's own and the toolkit's code, compiled alike in the harness alone (cudaMalloc<unsigned
        # char>, out of line in this build, under a name the file's cudaCheck(cudaMalloc(...)) may declare)
        harness_own = host_fingerprints(harness.obj, theirs_names & harness.refs.functions)
        theirs_names = {name for name in theirs_names if name not in harness_own or harness_own[name] != theirs[name]}
        ours = host_fingerprints(users.obj, theirs_names & users.refs.functions)
        for name in sorted(theirs_names):
            if name not in users.refs.functions or ours.get(name) != theirs.get(name):
                problems.append(f"{refs.readable_names.get(name, name)} is compiled in the generated program's {what} "
                                f"{'but not in your file' if name not in users.refs.functions else 'to other code than in your file'}: "
                                "code init leaves out (main, a launcher, a caller) changes which definition the rest "
                                "names (an overload, a template, a #define); wrap the kernel alone (--kernel) or give the "
                                "file's start-up code nothing that depends on what init leaves out")
        startup_problems += _startup_differences(reading, users, harness, what)
    return problems + startup_problems


def _kept_code_differences(source: str, program_text: str, *, arch: str, cache_dir: Path) -> list[str]:
    """The kept functions and kernels that compile to other code in the generated program, built
    as the verifier builds it: the editable unit alone (round 25: an overload the copy put below
    the editable part was found by a whole-file build, by argument-dependent lookup, and not by
    the verifier's). Both built as check (c) builds (`_COMPARED_BUILD`: no inlining but the forced
    kind), so that what differs is the code, not the compiler's inlining of a library function,
    which follows how often the rest of the unit calls it (a launcher's `throw
    std::runtime_error(std::string(...) + ...)` inlined std::string's constructor into its cold
    part in the file, where main built no other string, and called it out of line in the editable
    unit). Device code is compared on the PTX, which host flags do not change."""
    user_object = _object(_without_positions(source), arch=arch, cache_dir=cache_dir, optimised=True, what="the file",
                          extra_flags=_COMPARED_BUILD)
    user_refs = state_references(user_object)
    unit = split_program(program_text, "generated.cu").editable_unit()
    program_object = _object(_without_positions(unit), arch=arch, cache_dir=cache_dir, optimised=True,
                             what="the generated program's editable part", extra_flags=_COMPARED_BUILD)
    program_refs = state_references(program_object)
    # Every function the editable unit defines, not only the launcher and the kernels named in
    # its text: the copy moved all of it (round 26: a kernel launched through a macro's name).
    defined = {f for f in program_refs.functions if not generated(f, program_refs.readable_names.get(f))}
    names = defined & user_refs.functions
    ours, theirs = host_fingerprints(user_object, names), host_fingerprints(program_object, names)
    user_ptx = user_object.with_name("program.ptx").read_text()
    program_ptx = program_object.with_name("program.ptx").read_text()
    device = {unit_neutral(k) for k in user_refs.device_edges} & {unit_neutral(k) for k in program_refs.device_edges}
    ours.update(device_fingerprints(user_ptx, device))
    theirs.update(device_fingerprints(program_ptx, device))
    readable = dict(zip(sorted(ours), demangle(sorted(ours))))
    return [f"{bare_name(readable[name])} compiles to other code in the generated program than in your file (a "
            "#if region, a macro or an overload around the code init copies, or code that reads its own position "
            "such as __builtin_LINE()): keep the kernels and launcher outside #if blocks, or wrap the kernel alone "
            "(--kernel, --grid, --block)"
            for name in sorted(ours) if name in theirs and ours[name] != theirs[name]]
