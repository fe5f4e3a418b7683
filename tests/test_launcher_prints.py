"""A launcher's own error reports moved into frozen helpers by init (launcher_prints.py): what
moves (a literal format to stdout/stderr, the launcher's variables passed by const reference) and
what stays for the static gate to refuse (a format that is not a literal, `%n`, a stream of the
code's own)."""

from __future__ import annotations

import pytest

from kernelloop.program.launcher_prints import move_printing_out
from kernelloop.program.scanner import function_name, scoped_items


def _moved(launcher_body: str, name: str = "run") -> tuple[str, list[str]]:
    source = ("#include <cstdio>\n__global__ void k(float* y, int n) { if (n) y[0] = 1; }\n"
              f"void {name}(float* y, int n, const char* tag) {{\n  k<<<1, 1>>>(y, n);\n"
              f"  cudaError_t err = cudaGetLastError();\n{launcher_body}\n}}\n")
    launcher = next(i for i in scoped_items(source) if function_name(i) == name)
    return move_printing_out(source, launcher, name)


@pytest.mark.parametrize("statement, passed", [
    ('  if (err != cudaSuccess) fprintf(stderr, "k failed: %s (n = %d)\\n", cudaGetErrorString(err), n);', "err, n"),
    ('  if (err) { printf("launch of %d elements failed\\n", n); return; }', "n"),
    ('  if (err) puts("failed");', ""),
    ('  fflush(stdout);', ""),
    ('  if (err) printf("a" "b %d\\n", n);', "n"),
    # as C++ code spells them (kept-aside set 10: `std::fprintf` refused a launcher)
    ('  if (err) { std::fprintf(stderr, "k failed: %s\\n", cudaGetErrorString(err)); std::abort(); }', "err"),
    ('  if (err) ::printf("n = %d\\n", n);', "n"),
    ('  if (err) std :: fputs("failed\\n", ::stderr);', ""),
])
def test_a_report_to_stdout_or_stderr_with_a_literal_format_moves(statement, passed):
    text, notes = _moved(statement)
    assert notes and "kl_run_report_1" in notes[0]
    assert f"kl_run_report_1({passed});" in text
    helper = text[text.index("static void kl_run_report_1"):]
    assert statement.strip().split(")", 1)[-1].strip() in helper or statement.split("(")[0].strip() in helper
    # the helper is its own item before the launcher, in the same scope
    items = [function_name(i) for i in scoped_items(text) if i.kind == "code"]
    assert items.index("kl_run_report_1") < items.index("run")


@pytest.mark.parametrize("statement", [
    '  if (err) printf(tag);',  # the format is the caller's: a candidate could pass any
    '  if (err) printf("%s%n\\n", tag, &n);',  # %n writes through a pointer argument
    '  if (err) printf("%5hhn", &n);',
    '  if (err) printf("%" KL_FMT "\\n", tag);',  # a macro in the format could spell %n
    '  if (err) fprintf(log_file(), "failed\\n");',  # a stream that is not stdout or stderr
    '  if (err) std::cerr << "failed";',  # not a call: stays (the gate refuses it)
    '  if (err) my::fprintf(stderr, "failed\\n");',  # not the C library's
    '  if (err) std::fprintf(my::stderr, "failed\\n");',
    # a string the candidate could hand over, printed as the user's text (round 110: a forged
    # KERNEL_MS line): only numbers and error codes are passed
    '  if (err) perror(tag);',
    '  if (err) fprintf(stderr, "%s: launch failed: ", tag);',
    '  if (err) { const char* what = "k"; printf("%s\\n", what); }',
])
def test_printing_a_candidate_could_turn_into_something_else_stays(statement):
    text, notes = _moved(statement)
    assert notes == [] and "kl_run_report" not in text


def test_nothing_to_move_leaves_the_source_as_it_is():
    text, notes = _moved("  (void)err;")
    assert notes == [] and "kl_run_report" not in text


def test_a_launcher_in_a_namespace_gets_its_helper_in_the_namespace():
    source = ('#include <cstdio>\nnamespace ops {\n__global__ void k(float* y) { y[0] = 1; }\n'
              'void run(float* y) {\n  k<<<1, 1>>>(y);\n  if (cudaGetLastError()) fprintf(stderr, "no\\n");\n}\n}\n')
    launcher = next(i for i in scoped_items(source) if function_name(i) == "run")
    text, notes = move_printing_out(source, launcher, "run")
    helper = next(i for i in scoped_items(text) if function_name(i) == "kl_run_report_1")
    assert helper.scope == ("namespace ops",) and notes
