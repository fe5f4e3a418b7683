"""Red team round 96 (tests/fixtures/redteam/round96/): a kernel reading its file name without
spelling `__FILE__` (pasted with `##`, or `__builtin_FILE()`) and testing its length: the probe
only replaced the spelled token, and the comparison builds every file under one name. The file is
now built again under the shortest name and a long one. nvcc."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate

from .conftest import FIXTURES, shared_cache_dir

ROUND = FIXTURES / "redteam" / "round96" / "a_init_pasted_file_name"
pytestmark = pytest.mark.nvcc


@pytest.mark.parametrize("name", ["k.cu", "b.cu"])
def test_a_kernel_reading_its_file_name_however_spelled_is_refused(name):
    source = (ROUND / name).read_text()
    result = generate(source, InitSpec(values={"n": ["4096", "1000"]}), name)
    with pytest.raises(InputError, match="own position"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                         generated=result.program)
