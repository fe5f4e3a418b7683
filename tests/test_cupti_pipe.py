"""The CUPTI trace through the verifier's pipe (red team round 295's class: a trace file the program
could rewrite after the tracer's end record).

Pure tests of the sealed reader, and the real injection library loaded into a host program (no GPU
needed: it writes its first lines and goes passive) through the real sandbox and pipe."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelloop.tools.cupti import FD_ENV, CuptiUnavailable, build_injection_library, find_cupti, parse_trace
from kernelloop.tools.sandbox import Limits, private_workdir, run_sandboxed, stage_file

META = b'{"kind":"meta","cupti_version":130001,"pid":7}\n'
KERNEL = json.dumps({"kind": "kernel", "name": "_Z1kv", "start": 1, "end": 9, "corr": 1, "stream": 7, "device": 0,
                     "context": 1, "grid": [1, 1, 1], "block": [32, 1, 1], "dyn_smem": 0, "static_smem": 0,
                     "regs": 8, "graph_node": 0}, separators=(",", ":")).encode() + b"\n"


def _sealed(body: bytes) -> bytes:
    return body + b'{"kind":"end","bytes":%d}\n' % len(body)


def test_the_tracers_whole_stream_is_a_complete_trace():
    trace = parse_trace(_sealed(META + KERNEL), sealed=True)
    assert trace.complete and len(trace.kernels) == 1 and trace.pids == [7]


@pytest.mark.parametrize("forged", [
    _sealed(META + KERNEL) + KERNEL,  # appended after the end (a static destructor)
    KERNEL + _sealed(META + KERNEL),  # written before the tracer's first line
    META + KERNEL + b'{"kind":"end","bytes":%d}\n' % len(META),  # an end stating fewer bytes
    _sealed(META + KERNEL) + _sealed(META + KERNEL + b"x" * 0),  # a second end
    META + b'{"kind": "end", "bytes": %d}\n' % len(META),  # not the tracer's spelling of its end
    META + b'{"kind":"end","bytes":true}\n',
    META + b'{"kind":"end"}\n',  # the file format's end, without the count
    _sealed(META + KERNEL)[:-1],  # the end cut short
], ids=["after", "before", "short-count", "two-ends", "respelled", "bool-count", "no-count", "cut"])
def test_bytes_the_tracer_did_not_write_void_the_trace(forged):
    with pytest.raises(CuptiUnavailable, match="the program wrote to the tracer's pipe"):
        parse_trace(forged, sealed=True)


def test_a_trace_without_an_end_is_incomplete_not_refused():
    trace = parse_trace(META + KERNEL, sealed=True)  # the program left through _exit: the audit says so
    assert not trace.complete and len(trace.kernels) == 1


def test_an_empty_pipe_means_the_tracer_never_ran():
    with pytest.raises(CuptiUnavailable, match="never ran"):
        parse_trace(b"", sealed=True)


HOST = r"""
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
  /* argv[2]: "as-is", or the descriptor the sandbox named in OTHER_PIPE handed to the library
     exactly ("copy") or with another inode ("other-inode") */
  if (strcmp(argv[2], "as-is") != 0) {
    long long fd; unsigned long long dev, ino; char spec[128];
    if (sscanf(getenv("OTHER_PIPE"), "%lld:%llu:%llu", &fd, &dev, &ino) != 3) return 5;
    snprintf(spec, sizeof spec, "%lld:%llu:%llu", fd, dev, ino + (strcmp(argv[2], "copy") != 0));
    setenv("KERNELLOOP_CUPTI_FD", spec, 1);
  }
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 3; }
  int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
  if (init() != 1) return 4;
  const char *spec = getenv("KERNELLOOP_CUPTI_FD");
  int fd = spec ? atoi(spec) : -1;
  /* a program the process executes must not inherit the tracer's pipe */
  printf("cloexec=%d\n", fd >= 0 ? (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0 : -1);
  return 0;
}
"""


@pytest.fixture(scope="module")
def host_and_library(tmp_path_factory):
    try:
        find_cupti()
    except CuptiUnavailable as exc:
        pytest.skip(f"no CUPTI here: {exc}")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    where = tmp_path_factory.mktemp("cupti_pipe")
    (where / "host.c").write_text(HOST)
    subprocess.run(["cc", "-O1", "-o", str(where / "host"), str(where / "host.c"), "-ldl"], check=True,
                   capture_output=True)
    return where / "host", build_injection_library(where / "cache")


def _run(host: Path, lib: Path, mode: str = "as-is", env: dict[str, str] | None = None, pipes=(FD_ENV,)):
    with private_workdir() as work:
        exe, staged = stage_file(host, work), stage_file(lib, work)
        return run_sandboxed([str(exe), str(staged), mode], workdir=work, limits=Limits(wall_timeout_s=60), env=env,
                             pipes=pipes)


@pytest.mark.nvcc
def test_the_library_writes_to_the_named_pipe_and_keeps_it_from_children(host_and_library):
    result = _run(*host_and_library)
    assert result.returncode == 0, result.stderr
    assert "cloexec=1" in result.stdout
    lines = [json.loads(line) for line in result.pipes[FD_ENV].splitlines()]
    assert lines[0]["kind"] == "meta" and lines[0]["pid"] > 0  # written through the pipe, as the verifier reads it
    # without a GPU the library goes passive: no end record, so the audit would call the trace incomplete
    assert not parse_trace(result.pipes[FD_ENV], sealed=True).complete


@pytest.mark.nvcc
@pytest.mark.parametrize("mode,env", [("other-inode", None), ("as-is", {FD_ENV: "garbage"}),
                                      ("as-is", {FD_ENV: "1:1:1"})], ids=["other-inode", "garbage", "stdout"])
def test_a_pipe_named_wrongly_gets_nothing(host_and_library, mode, env):
    """The variable naming a descriptor that is not the pipe it names (a forged name, a program the
    process executed holding another descriptor under that number): the library writes nowhere."""
    result = _run(*host_and_library, mode=mode, env=env, pipes=("OTHER_PIPE",))
    assert result.returncode == 0, result.stderr
    assert result.pipes["OTHER_PIPE"] == b"" and "kind" not in result.stdout


@pytest.mark.nvcc
def test_the_same_pipe_named_exactly_is_written(host_and_library):  # the control for the test above
    result = _run(*host_and_library, mode="copy", pipes=("OTHER_PIPE",))
    assert result.returncode == 0, result.stderr
    assert result.pipes["OTHER_PIPE"].startswith(b'{"kind":"meta"')
