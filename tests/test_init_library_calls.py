"""Calls the code init leaves out (main, set-up) may make: the library's own names for plain calls
count as those calls. On the lent H200's Ubuntu (glibc 2.39) `atoi`/`strtol` compile to
`__isoc23_strtol`, and kept-aside set 14's llm.c-style programs were refused there though not here;
the compiler merges `sinf`/`cosf` of one value into `sincosf`, and `__builtin_popcount` calls
libgcc's `__popcountdi2`."""

from __future__ import annotations

import pytest

from kernelloop.init_state import left_out_call_allowed


@pytest.mark.parametrize("name", ["__isoc23_strtol", "__isoc23_strtoul", "__isoc23_strtoll", "__isoc99_sscanf",
                                  "__isoc23_fscanf", "sincosf", "sincos", "__popcountdi2", "__clzdi2",
                                  "__udivti3", "__mulsc3", "strtol", "atoi"])
def test_plain_library_calls_under_their_other_names_are_allowed(name):
    assert left_out_call_allowed(name)


@pytest.mark.parametrize("name", ["system", "__isoc23_system", "dlopen", "__isoc23_dlopen",
                                  "cudaDeviceSetLimit", "pthread_create", "mprotect"])
def test_calls_that_can_change_the_kept_code_stay_refused(name):
    assert not left_out_call_allowed(name)
