"""The policy gate: what an editable part may not do.

Checked three ways. The source scan gives readable messages and runs before anything
is compiled; the object scan (imported and defined symbols, host instructions, static
initializers) is the real guard, since macros, token pasting and function pointers can
hide a name from a text search but not from the linker; the linked program's shared
library dependencies are checked last.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from pydantic import BaseModel

from ..program.scanner import strip_comments


class Violation(BaseModel):
    rule: str
    where: str  # "source line N" | "object" | "program"
    detail: str

    def describe(self) -> str:
        return f"{self.rule} ({self.where}): {self.detail}"


# Headers an editable part may include. Anything else, and any quoted include, is refused:
# an include can read arbitrary files into compiler messages.
ALLOWED_HEADERS = re.compile(
    r"^(?:cuda_runtime(?:_api)?\.h|cuda\.h|device_launch_parameters\.h|cuda_fp16\.h|cuda_bf16\.h|cuda_fp8\.h"
    r"|cuda_pipeline(?:_primitives)?\.h|cuda_awbarrier(?:_primitives)?\.h|cooperative_groups\.h"
    r"|cooperative_groups/[\w/]+\.h|mma\.h|math_constants\.h|vector_types\.h|vector_functions\.h"
    r"|sm_\d+_intrinsics\.h|curand_kernel\.h|cuda/(?:pipeline|barrier|atomic|latch|semaphore|ptx|annotated_ptr|std/[\w/]+)"
    r"|cub/(?:block|warp|thread)/[\w/]+\.cuh|cub/util_\w+\.cuh"
    r"|c(?:stdint|stddef|stdio|stdlib|string|math|float|limits|assert)|(?:stdint|stddef|stdio|stdlib|string|math|float|limits|assert)\.h"
    r"|type_traits|utility|limits|algorithm|array|vector|cstdint|numeric|functional|tuple|initializer_list)$"
)
_VENDOR = r"(?:cublas\w*|cublasLt\w*|cudnn\w*|cufft\w*|cusparse\w*|cusolver\w*|curand[A-Z]\w*|nccl\w*)"
# (rule, pattern on comment- and string-free source, message)
_SOURCE_RULES: list[tuple[str, re.Pattern[str], str]] = [
    ("vendor-library", re.compile(rf"\b{_VENDOR}\b"), "vendor library call {m}: only hand-written kernels are allowed"),
    ("vendor-library", re.compile(r"\b(?:thrust|cutlass|cute)\s*::"), "library algorithm {m}: only hand-written kernels are allowed"),
    ("vendor-library", re.compile(r"\bcub\s*::\s*(?:\w+\s*::\s*)*Device\w+"), "cub device-wide call {m}: only block/warp-level cub is allowed"),
    # Short common words (open, write, connect, ...) are left to the object scan, which
    # sees what is really imported and does not trip over a device helper named `write`.
    ("process", re.compile(r"\b(?:system|popen|pclose|exec[lv]p?e?|execvpe|fexecve|fork|vfork|posix_spawnp?|ptrace)\s*\("), "process control {m}"),
    ("network", re.compile(r"\b(?:socket|getaddrinfo|gethostbyname|inet_pton|inet_addr)\s*\(|\bsockaddr(?:_in6?)?\b"), "network access {m}"),
    ("file-io", re.compile(r"\b(?:fopen|freopen|fdopen|openat|creat|fwrite|fread|fputs|fputc|fgets|pwrite|writev|unlink)\s*\("), "file access {m}"),
    ("file-io", re.compile(r"\b(?:std\s*::\s*)?(?:ofstream|ifstream|fstream|filebuf)\b"), "file stream {m}"),
    ("printing", re.compile(r"\b(?:printf|fprintf|dprintf|vprintf|vfprintf|puts|putchar|putc|fflush|perror)\s*\("), "printing {m}: only the frozen harness prints"),
    ("printing", re.compile(r"\b(?:std\s*::\s*)?(?:cout|cerr|clog)\b"), "printing {m}: only the frozen harness prints"),
    ("environment", re.compile(r"\b(?:getenv|secure_getenv|setenv|putenv|unsetenv|clearenv|environ|__environ)\b"), "environment access {m}"),
    ("dynamic-code", re.compile(r"\b(?:dlopen|dlsym|dlmopen|syscall)\s*\("), "dynamic loading or raw system call {m}"),
    ("static-init", re.compile(r"__attribute__\s*\(\(\s*(?:__)?constructor|\[\[\s*gnu\s*::\s*constructor"), "static constructor {m}: runs code before main"),
    ("harness-state", re.compile(r"\bcudaDeviceReset\s*\("), "{m} would destroy the harness's context"),
    ("main", re.compile(r"\bint\s+main\s*\("), "the editable part defines main()"),
    # Pasting builds names the text scan cannot see; kernels have no need for it.
    ("macro", re.compile(r"##"), "token pasting ({m}) can build forbidden names"),
]
_PROTECTED_MACRO = re.compile(
    r"^(?:cuda[A-Z]\w*|cu[A-Z]\w*|main|exit|abort|printf|fprintf|puts|fwrite|write|stderr|stdout|"
    r"malloc|free|memcpy|memset|std|KERNEL_MS|getenv|atexit|__\w+)$"
)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*(define|undef)[ \t]+([A-Za-z_]\w*)", re.M)
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*(include|include_next|import)\b[ \t]*(.*)$", re.M)


def _without_strings(text: str) -> str:
    return re.sub(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', '""', text)


_DIGRAPHS = [("%:%:", "##"), ("%:", "#"), ("<%", "{"), ("%>", "}"), ("<:", "["), (":>", "]"), ("??=", "#")]


def normalize_source(text: str) -> str:
    """What the compiler sees before tokenizing: line splices joined, digraphs and the
    `??=` trigraph spelled out. Scanning this defeats `#inc\\<newline>lude` and `%:include`."""
    text = re.sub(r"\\\r?\n", "", text)
    for digraph, plain in _DIGRAPHS:
        text = text.replace(digraph, plain)
    return text


# Rules on the text with string literals kept: what an asm string can ask the assembler.
_RAW_RULES: list[tuple[str, re.Pattern[str], str]] = [
    ("include", re.compile(r"\.(?:incbin|include)\b"), "assembler directive {m} reads a file into the program"),
    ("static-init", re.compile(r"__attribute__\s*\(\(\s*(?:__)?section|\[\[\s*gnu\s*::\s*section|#\s*pragma\s+section"),
     "explicit section placement {m} (init/fini arrays run code outside the harness)"),
    ("static-init", re.compile(r"\.(?:pre)?init_array|\.fini_array|\.ctors|\.dtors|\.section\b"),
     "assembler section {m} (code that runs outside the harness)"),
]


def scan_source(editable: str) -> list[Violation]:
    """Rules on the editable part's text (splices joined, digraphs spelled out, comments removed)."""
    text = strip_comments(normalize_source(editable))
    code = _without_strings(text)
    found: list[Violation] = []
    for rule, pattern, message in _RAW_RULES:
        for m in pattern.finditer(text):
            found.append(Violation(rule=rule, where=f"source line {text.count(chr(10), 0, m.start()) + 1}",
                                   detail=message.format(m=m.group(0).strip())))

    def line(offset: int) -> str:
        return f"source line {text.count(chr(10), 0, offset) + 1}"

    for m in _INCLUDE.finditer(text):
        target = m.group(2).strip()
        inner = re.match(r"^<\s*([^>]+?)\s*>", target)
        if m.group(1) != "include" or not inner or not ALLOWED_HEADERS.match(inner.group(1)):
            if inner and re.match(rf"^(?:{_VENDOR}|thrust|cutlass|cute|cub/(?:cub|device))", inner.group(1), re.I):
                found.append(Violation(rule="vendor-library", where=line(m.start()),
                                       detail=f"#include {target}: only hand-written kernels are allowed"))
            else:
                found.append(Violation(rule="include", where=line(m.start()),
                                       detail=f"#{m.group(1)} {target[:80]} is not an allowed system header"))
    for m in _DEFINE.finditer(text):
        if _PROTECTED_MACRO.match(m.group(2)):
            found.append(Violation(rule="macro", where=line(m.start()),
                                   detail=f"#{m.group(1)} {m.group(2)} redefines a library or harness name"))
    for rule, pattern, message in _SOURCE_RULES:
        for m in pattern.finditer(code):
            found.append(Violation(rule=rule, where=line(m.start()),
                                   detail=message.format(m=m.group(0).rstrip("(: ").strip())))
    return _dedupe(found)


# What the compiled editable part may import. An allow-list, not a deny-list: libc has
# too many ways to open a file, start a process or find a library (openat64_2, execveat,
# dl_iterate_phdr, setvbuf...) to enumerate. Everything a kernel launcher needs is here.
_ALLOWED_IMPORT = re.compile(
    r"^(?:"
    r"cuda(?!DeviceReset|LaunchHostFunc|StreamAddCallback|GraphAddHostNode|GraphExecHostNodeSetParams"
    r"|GraphHostNode|MallocManaged|Ipc|GetDriverEntryPoint|ProfilerSt|SetDeviceFlags|DeviceSetLimit"
    r"|HostRegister|LaunchCooperativeKernelMultiDevice)[A-Z]\w*"  # the CUDA runtime API, less escape hatches
    r"|__cuda(?!RegisterManagedVar)\w+"  # nvcc's fatbinary/kernel registration and launch configuration
    r"|_Znwm|_Znam|_ZdlPv\w*|_ZdaPv\w*|_ZnwmRKSt9nothrow_t|_ZnamRKSt9nothrow_t"  # operator new/delete
    r"|_ZnwmSt11align_val_t|_ZdlPvSt11align_val_t|_ZdlPvmSt11align_val_t"
    r"|__cxa_(?:guard_acquire|guard_release|guard_abort|begin_catch|end_catch|rethrow|allocate_exception"
    r"|free_exception|throw|pure_virtual|call_unexpected)"
    r"|__gxx_personality_v0|_Unwind_Resume|__stack_chk_fail|__dso_handle"
    r"|_ZSt\d+__throw_\w+|_ZSt9terminatev"
    r"|atexit"  # nvcc's own registration code unregisters the fatbinary at exit
    r"|memcpy|memmove|memset|memcmp|__memcpy_chk|__memset_chk|__memmove_chk|abort|exit"
    r"|malloc|calloc|realloc|free|aligned_alloc|posix_memalign"
    r"|(?:sqrt|cbrt|exp|exp2|expm1|log|log2|log10|log1p|pow|sin|cos|tan|asin|acos|atan|atan2|sinh|cosh|tanh"
    r"|erf|erfc|fabs|floor|ceil|round|lround|trunc|fmod|fmin|fmax|fma|hypot|ldexp|frexp|modf|nearbyint|rint)[fl]?"
    r"|__errno_location|__isinf\w*|__isnan\w*|__finite\w*|__fpclassify\w*"
    r")$"
)
# Kept for a readable message when the import is plainly an escape.
_BANNED_HINT = re.compile(
    r"(?:system|popen|exec|fork|spawn|socket|connect|open|read|write|print|put|getenv|environ|dl|syscall|setvbuf"
    r"|kill|mmap|ptrace|setsid|daemon|chmod|unlink|rename|send|recv|cout|cerr|fstream|Managed|HostFunc)",
    re.I,
)
_VENDOR_IMPORT = re.compile(rf"^{_VENDOR}$")
_VENDOR_DEFINED = re.compile(r"\b(?:thrust|cutlass|cute)::|\bcub::(?:\w+::)*Device\w+")
_ALLOWED_LIBS = re.compile(r"^(?:libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[-\w.]*)\.so")
_HOST_SYSCALL = re.compile(r"\s(?:syscall|sysenter|int\s+\$0x80)\b")


def demangle(names: list[str]) -> list[str]:
    if not names:
        return []
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, timeout=60).stdout
        lines = out.splitlines()
        return lines if len(lines) == len(names) else names
    except (OSError, subprocess.SubprocessError):
        return names


# The frozen preamble is trusted: an error-check macro there (CUDA_CHECK printing with
# fprintf and calling exit) may be used by the editable part. What a call in the
# preamble can compile to (gcc turns printf("x\n") into puts, fprintf of a constant into fwrite):
_PREAMBLE_CALL_IMPORTS = {
    "fprintf": {"fprintf", "__fprintf_chk", "fwrite", "fputs", "fputc", "putc", "stderr"},
    "printf": {"printf", "__printf_chk", "puts", "putchar"},
    "puts": {"puts"},
    "fputs": {"fputs", "fwrite"},
    "perror": {"perror"},
    "fflush": {"fflush"},
}


def preamble_allowed_imports(preamble: str, editable: str) -> set[str]:
    """Printing imports the preamble's own macros/helpers explain, if the editable part
    names no printing call itself and pastes no tokens (so nothing is smuggled)."""
    code = _without_strings(strip_comments(normalize_source(editable)))
    # Naming one at all (`&fwrite`, `stderr`) means the import may not be the preamble's.
    named = re.search(r"\b(?:%s|FILE|stdout|_IO_\w+)\b" % "|".join(
        sorted({name for names in _PREAMBLE_CALL_IMPORTS.values() for name in names} | set(_PREAMBLE_CALL_IMPORTS))), code)
    if "##" in code or named or any(rule == "printing" and p.search(code) for rule, p, _ in _SOURCE_RULES):
        return set()
    pre = _without_strings(strip_comments(preamble))
    allowed: set[str] = set()
    for call, imports in _PREAMBLE_CALL_IMPORTS.items():
        if re.search(rf"\b{call}\s*\(", pre):
            allowed |= imports
    return allowed


def scan_object(
    editable_object: Path,
    *,
    defined_global: list[str],
    undefined: list[str],
    harness_undefined: list[str],
    allowed_exports: list[str],
    baseline_init_entries: int,
    trusted_imports: set[str] = frozenset(),
) -> list[Violation]:
    """Rules on the compiled editable part: what it imports, defines and runs at load."""
    found: list[Violation] = []
    for raw, name in zip(undefined, demangle(undefined)):
        base = raw.split("@")[0]
        if base in trusted_imports or _ALLOWED_IMPORT.match(base):
            continue
        if _VENDOR_IMPORT.match(name.split("(")[0]):
            found.append(Violation(rule="vendor-library", where="object", detail=f"calls {name}"))
        else:
            hint = " (process, file, network, environment or printing access)" if _BANNED_HINT.search(name) else ""
            found.append(Violation(rule="forbidden-call", where="object",
                                   detail=f"uses {name}{hint}: not on the allow-list of host calls"))
    for raw, name in zip(defined_global, demangle(defined_global)):
        if _VENDOR_DEFINED.search(name):
            found.append(Violation(rule="vendor-library", where="object", detail=f"contains {name.split('(')[0]}"))
    interposed = sorted(set(defined_global) & set(harness_undefined) - set(allowed_exports))
    for raw, name in zip(interposed, demangle(interposed)):
        found.append(Violation(rule="interposition", where="object",
                               detail=f"defines {name}, which the harness takes from a library"))
    disassembly = _run(["objdump", "-d", "--no-show-raw-insn", str(editable_object)])
    if _HOST_SYSCALL.search(disassembly):
        found.append(Violation(rule="dynamic-code", where="object", detail="raw system call instruction in host code"))
    entries = init_array_entries(editable_object)
    if entries > baseline_init_entries:
        found.append(Violation(rule="static-init", where="object",
                               detail=f"{entries - baseline_init_entries} function(s) run before or after main"))
    return _dedupe(found)


_RUN_OUTSIDE_MAIN = (".init_array", ".preinit_array", ".fini_array", ".ctors", ".dtors")


def init_array_entries(obj: Path) -> int:
    """Relocations in .preinit_array/.init_array/.fini_array/.ctors/.dtors: each is a
    function run before or after main, outside the harness's control."""
    text = _run(["readelf", "-rW", str(obj)])
    count, inside = 0, False
    for line in text.splitlines():
        if line.startswith("Relocation section"):
            inside = any(section in line for section in _RUN_OUTSIDE_MAIN)
        elif inside and re.match(r"^[0-9a-f]{8,}\s", line):
            count += 1
    return count


def scan_program(binary: Path) -> list[Violation]:
    """The linked program may depend only on the C/C++ runtime (cudart is static)."""
    text = _run(["readelf", "-dW", str(binary)])
    found = []
    for lib in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", text):
        if not _ALLOWED_LIBS.match(lib):
            found.append(Violation(rule="vendor-library", where="program", detail=f"links {lib}"))
    return found


def _run(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _dedupe(violations: list[Violation]) -> list[Violation]:
    seen: set[tuple[str, str]] = set()
    out = []
    for v in violations:
        key = (v.rule, v.detail)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out
