"""Red team round 303 (tests/fixtures/redteam/round303/REPORT.md), on 5329183: four routes past round 302's "no code
of the program's runs before the libraries' constructors". Closed by class at the program's build: (A2) a frozen
`__gmon_start__`, which libraries built with crti.o call from their DT_INIT before their own constructors, exported
by the executable: a baseline program may export no definition but the libraries' own data copied into it; (A3) a
`.init_array.00050` entry spelled in split string literals (".push" "section ...") ran before the header's settings
snapshot: the directive check reads adjacent literals as one string, and a v2 program's first constructor must be
the header's. Open, recorded under Known limits: (A1) frozen code rewrote the tracer's own memory (its sink, nonce
and count) found through the loader's program headers, and (A4) called forbidden functions through pointers it
resolved at run time: name-based rules cannot close what runs inside the harness's process."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program
from kernelloop.verify.policy import code_before_the_libraries, first_constructor

from .conftest import FIXTURES

ROUND = FIXTURES / "redteam" / "round303"


def test_round303_a_loader_directive_in_split_literals_is_refused():
    with pytest.raises(InputError, match=r"places code or symbols for the loader"):
        split_program((ROUND / "v_split_literal_init_array.cu").read_text(), "v.cu")


def _build(tmp_path, source: str, *flags: str):
    if shutil.which("cc") is None or shutil.which("readelf") is None:
        pytest.skip("no C compiler or readelf")
    (tmp_path / "p.c").write_text(source)
    subprocess.run(["cc", "-O1", "-o", str(tmp_path / "p"), str(tmp_path / "p.c"), *flags], check=True,
                   capture_output=True)
    return tmp_path / "p"


def test_a_definition_the_libraries_bind_to_is_seen(tmp_path):
    program = _build(tmp_path, "#include <math.h>\nvoid __gmon_start__(void) {}\n"
                               "int main(int c, char** v) { (void)v; return (int)sqrt((double)c); }\n", "-lm")
    assert "__gmon_start__" in (code_before_the_libraries(program) or "")


def test_the_libraries_data_copied_into_the_program_is_not_a_definition(tmp_path):
    program = _build(tmp_path, "#include <stdio.h>\nint main(void) { fputs(\"x\", stderr); return 0; }\n")
    assert code_before_the_libraries(program) is None


def test_the_first_constructor_is_the_one_of_the_lowest_priority(tmp_path):
    program = _build(tmp_path, "volatile int x;\n"
                               "static void later(void) __attribute__((constructor(150)));\n"
                               "static void later(void) { x = 1; }\n"
                               "static void first(void) __attribute__((constructor(120)));\n"
                               "static void first(void) { x = 2; }\n"
                               "int main(void) { return x; }\n")
    assert first_constructor(program) == "first"


@pytest.mark.nvcc
def test_round303_a_baseline_exporting_a_library_hook_is_refused(tmp_path):
    """The whole static gate on the red team's baseline (nvcc builds it)."""
    from kernelloop.config import Settings, VerifySettings
    from kernelloop.verify.static_check import check_static_files
    settings = Settings(cache_dir=tmp_path, verify=VerifySettings(arch="sm_90"))
    with pytest.raises(InputError, match="definitions the libraries bind to"):
        check_static_files(ROUND / "v_gmon_start_divert.cu", ROUND / "v_gmon_start_divert.cu", settings)
