"""What `init` should write, from the launches a running program made (`init --capture`).

It sits above the contract (program/) and the tools (nvcc, the capture library): it builds and
runs the user's program, then turns what the capture saw into an init spec.

A capture (tools/capture.py) says, for the hottest launch shape of a kernel: grid, block,
dynamic shared memory, every scalar argument's value and, for every pointer argument, the size
of the allocation it points into (and a sample of what it held before the kernel ran). This
module turns that into an `InitSpec` for `init.generate`:

- scalars get their captured values;
- each buffer's element count, each grid dimension and the shared memory are written as C
  expressions of the integer arguments when one matches the captured numbers (`n`, `B * T`,
  `(n + 255) / 256`), so that the harness can also run a second, smaller size; when one does not
  match, the captured number is written as it is and only the captured size is checked;
- integer inputs are drawn from the range their sample showed.
Every such inference is a note (a GUESS comment in the file). The user's options override it.
"""

from __future__ import annotations

import itertools
import math
import struct
from pathlib import Path

import numpy as np

from .errors import InputError
from .tools.capture import Capture, CapturedKernel, CaptureLimits, LaunchShape, capture_launches
from .tools.nvcc import build_whole_program, compiler_error
from .program.init import InitResult, InitSpec, generate, kernel_params
from .program.numeric_types import element_type
from .program.scanner import function_name, scan_items, strip_comments
from .program.split import inline_user_headers, read_program

# struct formats of the scalar types a captured argument can be decoded as.
_SCALAR_FORMAT = {"float": "<f", "double": "<d", "int32_t": "<i", "uint32_t": "<I", "int64_t": "<q",
                  "uint64_t": "<Q", "int16_t": "<h", "uint16_t": "<H", "int8_t": "<b", "uint8_t": "<B"}
_NUMPY = {"float": np.float32, "double": np.float64, "int32_t": np.int32, "uint32_t": np.uint32,
          "int64_t": np.int64, "uint64_t": np.uint64, "int16_t": np.int16, "uint16_t": np.uint16,
          "int8_t": np.int8, "uint8_t": np.uint8}
_ELEMENT_BYTES = {"float": 4, "double": 8, "__half": 2, "__nv_bfloat16": 2, "int32_t": 4, "uint32_t": 4,
                  "int64_t": 8, "uint64_t": 8, "int16_t": 2, "uint16_t": 2, "int8_t": 1, "uint8_t": 1}
_MAX_ALIGNMENT = 256


def pick_kernel(capture: Capture, defined: list[str], wanted: str | None) -> CapturedKernel:
    """The captured kernel to wrap: `wanted`, else the one with most GPU time that the file defines."""
    if not capture.kernels:
        raise InputError("the program launched no kernel while it was captured"
                         + (f" (it exited with {capture.exit_code})" if capture.exit_code else ""))
    ran = [k.base_name for k in capture.kernels]
    for kernel in capture.kernels:
        if (wanted is None and kernel.base_name in defined) or kernel.base_name == wanted:
            return kernel
    if wanted is not None:
        raise InputError(f"the program never launched {wanted!r}; it launched: {', '.join(dict.fromkeys(ran))}")
    raise InputError(f"the program launched {', '.join(dict.fromkeys(ran))}, none of which the file defines "
                     f"({', '.join(defined) or 'no kernel'}); give the file that holds the kernel's code")


def _decode(raw: bytes, element: str) -> str:
    fmt = _SCALAR_FORMAT.get(element)
    if fmt is None or struct.calcsize(fmt) != len(raw):
        raise InputError(f"a captured {element} argument has {len(raw)} bytes; init cannot set it: "
                         "write the harness by hand (docs/contract.md)")
    value = struct.unpack(fmt, raw)[0]
    if element in ("float", "double"):
        if not math.isfinite(value):
            raise InputError(f"a captured {element} argument is {value}: init reproduces finite values only")
        text = f"{value:.9g}" if element == "float" else f"{value:.17g}"
        if not any(c in text for c in ".e"):
            text += ".0"  # a floating literal: 1.0f, not 1f
        return text + ("f" if element == "float" else "")
    return str(value)


def _products(sizes: dict[str, int], limit: int = 3) -> list[tuple[str, int]]:
    """Products of up to `limit` integer arguments (a name may repeat: n * n), fewest factors first."""
    out: list[tuple[str, int]] = []
    names = sorted(sizes)
    for k in range(1, limit + 1):
        combos = list(itertools.combinations_with_replacement(names, k))
        combos.sort(key=lambda c: len(set(c)) != len(c))  # M * K before K * K
        for combo in combos:
            out.append((" * ".join(combo), math.prod(sizes[n] for n in combo)))
    return out


def _count_expression(count: int, sizes: dict[str, int]) -> str | None:
    for text, value in _products(sizes):
        if value == count:
            return text
    return None


def _grid_expression(cells: int, block_dims: list[int], sizes: dict[str, int], preferred: int) -> str | None:
    """A C expression of the arguments equal to a grid dimension: `rows`, `(n + 255) / 256`, ..."""
    # A block's threads, or a few elements per thread of it.
    divisors = list(dict.fromkeys([preferred * k for k in (1, 2, 4, 8)] + [d for d in block_dims if d > 1]))
    for text, value in _products(sizes, limit=2):
        if value == cells:
            return text
        for d in divisors:
            if d > 1 and -(-value // d) == cells:
                factor = f"({text})" if " " in text else text
                return f"({factor} + {d - 1}) / {d}"
    return None


def _smem_expression(smem: int, threads: int, sizes: dict[str, int]) -> str | None:
    for width in (1, 2, 4, 8, 16):
        if smem == threads * width:
            return str(smem)  # a function of the (literal) block only
    for text, value in _products(sizes, limit=2):
        for width in (1, 2, 4, 8, 16):
            if value * width == smem:
                return f"({text}) * {width}"
    return None


def _alternative(value: int) -> int:
    """A second size near 3/4 of `value` that is a multiple of the power of two the captured one
    was (up to 256 and a quarter of it) and shares no larger factor with it: every size checked
    is then a multiple of that alignment only, so a kernel that drops any remainder is caught
    (red team round 12: 3/4 of 2^24 shared a factor of 2^22 with it)."""
    alignment = min(value & -value, _MAX_ALIGNMENT, 1 << max(0, (value // 4).bit_length() - 1))
    units = value // alignment
    target = round(value * 3 / 4 / alignment)
    for step in range(units):
        for k in (target - step, target + step):
            if 0 < k < units and math.gcd(units, k) == 1:
                return k * alignment
    return value


def spec_from_capture(kernel: CapturedKernel, param_names: list[str], given: InitSpec,
                      source_pointers: set[str] | None = None) -> tuple[InitSpec, list[str]]:
    """An InitSpec reproducing `kernel`'s hottest launch shape; the user's `given` options win.

    `param_names` are the kernel's parameter names from its source, in order."""
    shape: LaunchShape = kernel.shapes[0]
    launch = shape.example
    notes: list[str] = []
    if len(param_names) != len(launch.args):
        raise InputError(f"{kernel.base_name} takes {len(param_names)} parameters in the file but was launched "
                         f"with {len(launch.args)}: is the file the one the program was built from?")
    share = shape.gpu_ns / kernel.gpu_ns if kernel.gpu_ns else shape.launches / kernel.launches
    notes.append(f"captured {kernel.launches} launch(es) of {kernel.signature or kernel.name}; this harness "
                 f"reproduces the launch shape with {share:.0%} of its GPU time "
                 f"(<<<({', '.join(map(str, launch.grid))}), ({', '.join(map(str, launch.block))}), {launch.smem}>>>, "
                 f"{shape.launches} launch(es))" + (f"; {len(kernel.shapes) - 1} other shape(s) left out"
                                                      if len(kernel.shapes) > 1 else ""))
    elements: dict[str, str] = {}
    values: dict[str, str] = {}
    pointers: dict[str, tuple[int, int]] = {}  # name -> (element count, allocation base)
    for name, arg in zip(param_names, launch.args):
        ctype = arg.type or ""
        if arg.raw is None or arg.size is None:
            raise InputError(f"argument {name} of {kernel.base_name} ({ctype or 'unknown type'}) could not be "
                             "captured: init reproduces numbers and pointers to numbers only")
        element = element_type(ctype)
        if element is None:
            raise InputError(f"argument {name} of {kernel.base_name} has type {ctype!r}, which init cannot generate "
                             "(numbers and pointers to numbers only); write the harness by hand (docs/contract.md)")
        elements[name] = element
        if arg.pointer is None and "*" not in ctype:
            values[name] = _decode(arg.raw, element)
            continue
        if arg.pointer is None or arg.pointer.memory not in ("device", "managed"):
            where = "a null pointer" if arg.address in (0, None) else "host memory"
            raise InputError(f"argument {name} of {kernel.base_name} points to {where}; init reproduces buffers in "
                             "GPU memory only")
        offset = arg.offset or 0
        count = (arg.pointer.size - offset) // _ELEMENT_BYTES[element]
        if offset:
            notes.append(f"{name} pointed {offset} bytes into a {arg.pointer.size}-byte allocation; the harness gives "
                         f"it a buffer of the {count} elements from there to the allocation's end")
        pointers[name] = (count, arg.pointer.base)
    bases = [base for _, base in pointers.values()]
    for base in {b for b in bases if bases.count(b) > 1}:
        shared = [n for n, (_, b) in pointers.items() if b == base]
        notes.append(f"{', '.join(shared)} pointed into one allocation; the harness gives each its own buffer, so "
                     "a kernel that relies on them overlapping is not reproduced")
    sizes = {n: int(v) for n, v in values.items() if elements[n] not in ("float", "double") and int(v) > 0}
    exact = True  # every count and grid dimension is an expression of the arguments
    counts: dict[str, str] = {}
    for name, (count, _) in pointers.items():
        if name in given.counts:
            counts[name] = given.counts[name]
            continue
        expression = _count_expression(count, sizes)
        if expression is None:
            exact = False
            counts[name] = str(count)
            notes.append(f"{name} holds {count} elements (its allocation's size; no product of the integer "
                         f"arguments gives it: --count {name}=EXPR to tie it to them)")
        else:
            counts[name] = expression
            notes.append(f"{name} holds {expression} elements (= {count}, its allocation's size)")
    block = launch.block
    threads = block[0] * block[1] * block[2]
    grid_parts: list[str] = []
    for axis, cells in enumerate(launch.grid):
        if cells == 1:
            grid_parts.append("1")
            continue
        expression = _grid_expression(cells, list(block), sizes, block[axis])
        if expression is None:
            exact = False
            grid_parts.append(str(cells))
        else:
            grid_parts.append(expression)
    grid = given.grid or f"dim3({', '.join(grid_parts)})"
    block_text = given.block or f"dim3({block[0]}, {block[1]}, {block[2]})"
    if given.grid is None:
        notes.append(f"launched as <<<{grid}, {block_text}>>> (from the capture; --grid/--block to change)")
    smem = None
    if launch.smem:
        smem = _smem_expression(launch.smem, threads, sizes)
        if smem is None:
            exact = False
            smem = str(launch.smem)
        notes.append(f"dynamic shared memory {smem} bytes (= {launch.smem} captured)")
    ranges = dict(given.ranges)
    for (name, arg), sample in zip(zip(param_names, launch.args), kernel.samples):
        element = elements.get(name)
        if (name not in pointers or name in ranges or element not in _NUMPY
                or "const" not in (arg.type or "") or not sample):
            continue
        data = np.frombuffer(sample[: len(sample) // _ELEMENT_BYTES[element] * _ELEMENT_BYTES[element]],
                             dtype=_NUMPY[element])
        if element in ("float", "double"):
            # The values the program really gives the kernel (pixels in [0, 255], not [-1, 1)): a
            # kernel that computes only on its own values would otherwise be checked on others.
            finite = data[np.isfinite(data)]
            if finite.size:
                lo, hi = float(finite.min()), float(finite.max())
                if hi <= lo:
                    lo, hi = min(lo, 0.0), max(hi, 1.0)
                ranges[name] = (repr(lo), repr(hi))
                notes.append(f"{name} held values in [{lo:g}, {hi:g}] in the first {data.size} values the capture "
                             f"read; its inputs are drawn from that range (--range {name}=LO,HI to change)")
            continue
        if data.size:
            lo, hi = int(data.min()), int(data.max()) + 1
            if hi - lo == 1:
                # One value seen (a mask whose sampled rows were all valid) would be a constant input,
                # which a kernel can ignore (red team round 18): draw 0 up to it as well.
                lo, hi = min(lo, 0), max(hi, 2)
                notes.append(f"{name} held only {int(data.min())} in the values the capture read: its inputs are drawn "
                             f"from [{lo}, {hi}) so it is not a constant (--range {name}=LO,HI to change)")
            ranges[name] = (str(lo), str(hi))
            notes.append(f"{name} held integers in [{lo}, {hi}) in the first {data.size} values the capture read; "
                         f"its inputs are drawn from that range (--range {name}=LO,HI to change)")
    used = {n for n in sizes if any(n in e.replace("(", " ").replace(")", " ").replace("*", " ").split()
                                    for e in [*counts.values(), grid, smem or ""])}
    spec_values: dict[str, list[str]] = {}
    alternative_by_value: dict[int, int] = {}
    for name in param_names:
        if name not in values:
            continue
        if name in given.values:
            spec_values[name] = given.values[name]
        elif exact and name in used and sizes.get(name, 0) >= 8:
            v = sizes[name]
            alt = alternative_by_value.setdefault(v, _alternative(v))
            spec_values[name] = [values[name], str(alt)]
        else:
            spec_values[name] = [values[name]]
    if any(len(v) > 1 for v in spec_values.values()):
        alts = [f"{k}={v[1]}" for k, v in spec_values.items() if len(set(v)) > 1]
        notes.append(f"a second size is checked too: {', '.join(alts)} (about 3/4 of the captured one, a multiple of "
                     "the power of two it was, up to 256, and of no larger common factor; arguments equal in the "
                     "capture stay equal)")
    elif not exact:
        notes.append("only the captured size is checked: some count or grid dimension matched no expression of the "
                     "arguments (give --count/--grid as expressions and --set NAME=DEFAULT,ALTERNATIVE to add one)")
    spec = given.model_copy(update={
        "kernel": kernel.base_name, "values": spec_values, "counts": counts, "grid": grid, "block": block_text,
        "ranges": ranges, "template_args": given.template_args or kernel.template_args,
        "shared_memory": given.shared_memory or smem})
    return spec, notes


def init_from_capture(source_path: Path, given: InitSpec, *, cache_dir: Path, arch: str, limits: CaptureLimits,
                      command: list[str] | None = None, keep: Path | None = None,
                      include_dirs: list[Path] | None = None) -> tuple[InitResult, Capture]:
    """Run the user's program once under capture (their own `main`, built from `source_path`, or
    `command`), and write a contract-v2 program reproducing its hottest kernel's hottest launch."""
    text = read_program(source_path)
    items = scan_items(text)
    defined = [function_name(i) or "" for i in items
               if i.is_function_definition and "__global__" in strip_comments(i.head)]
    if not defined:
        raise InputError(f"{source_path}: no __global__ kernel defined in the file")
    if command is None:
        if not any(function_name(i) == "main" and i.is_function_definition for i in items):
            raise InputError(f"{source_path} has no main(): give the command that runs your program, "
                             "--capture-command './app ARGS' (or the sizes with --set instead of --capture)")
        build = build_whole_program(inline_user_headers(text, str(source_path), include_dirs or []), arch=arch,
                                    cache_dir=cache_dir)
        if not build.ok:
            raise InputError(f"{source_path} does not build as it is: {compiler_error(build.log)}")
        command = [str(build.binary)]
    capture = capture_launches(command, cwd=source_path.resolve().parent, cache_dir=cache_dir, limits=limits,
                               keep=keep)
    kernel = pick_kernel(capture, defined, given.kernel)
    names = [p.name for p in kernel_params(text, kernel.base_name, given.template_args or kernel.template_args)]
    spec, notes = spec_from_capture(kernel, names, given)
    if capture.exit_code:
        notes.insert(0, f"the captured run exited with {capture.exit_code}: check that it ran as it normally does")
    result = generate(text, spec.model_copy(update={"notes": [*given.notes, *notes]}), source_path.name)
    return result, capture
