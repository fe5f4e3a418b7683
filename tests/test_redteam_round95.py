"""Red team round 95 (tests/fixtures/redteam/round95/): a kernel computing `__LINE__ / 16` gave the
same code at the two stand-in positions init tried (0 and 1), while the copy, on line 18, computed
twice the user's result. The probe build now reads every position in device code from a device
variable, so any dependence on it shows. nvcc."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate

from .conftest import FIXTURES, shared_cache_dir

ROUND = FIXTURES / "redteam" / "round95"
pytestmark = pytest.mark.nvcc


@pytest.mark.parametrize("value", ["__LINE__ / 16", "(__LINE__ % 1000003 > 7)", "(__COUNTER__ / 2)",
                                   "(int)(sizeof(__FILE__) > 20)", "__FILE__[0] == 'x'"])
def test_a_kernel_that_depends_on_its_position_in_any_way_is_refused(value):
    path = ROUND / "a_init_line_probe_one_value" / "user.cu"
    source = path.read_text().replace("__LINE__ / 16", value)
    assert value in source
    result = generate(source, InitSpec(values={"n": ["4096", "1000"]}), path.name)
    with pytest.raises(InputError, match="own position|where a constant is needed"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                         generated=result.program)
