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

NONCE = b"0123456789abcdef0123456789abcdef"
START = b'{"kind":"start","pid":7,"early":1,"nonce":"%s"}\n' % NONCE
META = START + b'{"kind":"meta","cupti_version":130001,"pid":7}\n'
KERNEL = json.dumps({"kind": "kernel", "name": "_Z1kv", "start": 1, "end": 9, "corr": 1, "stream": 7, "device": 0,
                     "context": 1, "grid": [1, 1, 1], "block": [32, 1, 1], "dyn_smem": 0, "static_smem": 0,
                     "regs": 8, "graph_node": 0}, separators=(",", ":")).encode() + b"\n"


def _sealed(body: bytes, nonce: bytes = NONCE) -> bytes:
    return body + b'{"kind":"end","bytes":%d,"nonce":"%s"}\n' % (len(body), nonce)


def test_the_tracers_whole_stream_is_a_complete_trace():
    trace = parse_trace(_sealed(META + KERNEL), sealed=True)
    assert trace.complete and len(trace.kernels) == 1 and trace.pids == [7]


@pytest.mark.parametrize("forged", [
    _sealed(META + KERNEL) + KERNEL,  # appended after the end (a static destructor)
    KERNEL + _sealed(META + KERNEL),  # written before the tracer's first line
    META + KERNEL + b'{"kind":"end","bytes":%d,"nonce":"%s"}\n' % (len(META), NONCE),  # an end stating fewer bytes
    _sealed(META + KERNEL) + _sealed(KERNEL),  # a second end
    META + b'{"kind": "end", "bytes": %d, "nonce": "%s"}\n' % (len(META), NONCE),  # not the tracer's spelling
    META + b'{"kind":"end","bytes":true,"nonce":"%s"}\n' % NONCE,
    META + b'{"kind":"end"}\n',  # the file format's end, without the count
    _sealed(META + KERNEL, nonce=b"f" * 32),  # an end written by something that does not know the start's nonce
    _sealed(META[len(START):] + KERNEL),  # no start line: the tracer did not write first
    _sealed(META + KERNEL)[:-1],  # the end cut short
], ids=["after", "before", "short-count", "two-ends", "respelled", "bool-count", "no-count", "other-nonce",
        "no-start", "cut"])
def test_bytes_the_tracer_did_not_write_void_the_trace(forged):
    with pytest.raises(CuptiUnavailable, match="the program wrote to the tracer's pipe|start line"):
        parse_trace(forged, sealed=True)


def test_a_tracer_that_read_its_pipe_after_the_program_started_is_refused():
    """Loaded by the driver at the first CUDA call, not preloaded: the program's code ran first and could have
    named another pipe (red team round 301), so the stream cannot be told from a relayed one."""
    late = META.replace(b'"early":1', b'"early":0')
    with pytest.raises(CuptiUnavailable, match="not preloaded"):
        parse_trace(_sealed(late + KERNEL), sealed=True)
    with pytest.raises(CuptiUnavailable, match="start line"):
        parse_trace(_sealed(META.replace(b',"early":1', b"") + KERNEL), sealed=True)


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
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
  /* argv[2]: "as-is", or the descriptor the sandbox named in OTHER_PIPE handed to the library
     exactly ("copy") or with another inode ("other-inode"), or "divert": the variable's text rewritten in place to
     name a pipe of the program's own before the library starts (red team round 301) */
  if (strcmp(argv[2], "late") == 0) {  /* as the driver loads it: libcuda first (here a stand-in of that name) */
    char stand_in[4096];
    snprintf(stand_in, sizeof stand_in, "%s", argv[1]);
    char *slash = strrchr(stand_in, '/');
    snprintf(slash ? slash + 1 : stand_in, sizeof stand_in - (size_t)(slash ? slash + 1 - stand_in : 0),
             "libcuda.so.1");
    if (!dlopen(stand_in, RTLD_NOW)) { fprintf(stderr, "stand-in: %s\n", dlerror()); return 8; }
  } else if (strcmp(argv[2], "divert") == 0) {
    char *spec = getenv("KERNELLOOP_CUPTI_FD");
    int p[2];
    struct stat st;
    if (spec == NULL || pipe(p) != 0 || fstat(p[1], &st) != 0) return 6;
    char mine[96];
    int len = snprintf(mine, sizeof mine, "%d:%llu:%llu", p[1], (unsigned long long)st.st_dev,
                       (unsigned long long)st.st_ino);
    size_t room = strlen(spec);
    if (len <= 0 || (size_t)len > room) return 7;
    memset(spec, '0', room - (size_t)len);
    memcpy(spec + (room - (size_t)len), mine, (size_t)len);
  } else if (strcmp(argv[2], "as-is") != 0) {
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
    (where / "stand_in.c").write_text("int kl_stand_in;\n")  # an empty library named like the driver's
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(where / "libcuda.so.1"),
                    str(where / "stand_in.c")], check=True, capture_output=True)
    return where / "host", build_injection_library(where / "cache"), where / "libcuda.so.1"


def _run(host: Path, lib: Path, stand_in: Path, mode: str = "as-is", env: dict[str, str] | None = None,
         pipes=(FD_ENV,), preload: bool = True):
    with private_workdir() as work:
        exe, staged = stage_file(host, work), stage_file(lib, work)
        stage_file(stand_in, work)
        env = {**({"LD_PRELOAD": str(staged)} if preload else {}), **(env or {})}
        return run_sandboxed([str(exe), str(staged), mode], workdir=work, limits=Limits(wall_timeout_s=60), env=env,
                             pipes=pipes)


@pytest.mark.nvcc
def test_the_library_writes_to_the_named_pipe_and_keeps_it_from_children(host_and_library):
    result = _run(*host_and_library)
    assert result.returncode == 0, result.stderr
    assert "cloexec=1" in result.stdout
    lines = [json.loads(line) for line in result.pipes[FD_ENV].splitlines()]
    assert lines[0]["kind"] == "start" and lines[0]["early"] == 1 and len(lines[0]["nonce"]) == 32
    assert lines[1]["kind"] == "meta" and lines[1]["pid"] > 0  # written through the pipe, as the verifier reads it
    # without a GPU the library goes passive: no end record, so the audit would call the trace incomplete
    assert not parse_trace(result.pipes[FD_ENV], sealed=True).complete


@pytest.mark.nvcc
@pytest.mark.parametrize("mode,env", [("other-inode", None), ("as-is", {FD_ENV: "garbage"}),
                                      ("as-is", {FD_ENV: "1:1:1"})], ids=["other-inode", "garbage", "stdout"])
def test_a_pipe_named_wrongly_gets_nothing(host_and_library, mode, env):
    """The variable naming a descriptor that is not the pipe it names (a forged name, a program the
    process executed holding another descriptor under that number): the library writes nowhere."""
    # not preloaded: the library reads the name the host program set, when it loads it
    result = _run(*host_and_library, mode=mode, env=env, pipes=("OTHER_PIPE",), preload=False)
    assert result.returncode == 0, result.stderr
    assert result.pipes["OTHER_PIPE"] == b"" and "kind" not in result.stdout


@pytest.mark.nvcc
def test_a_variable_rewritten_by_the_program_does_not_move_the_trace(host_and_library):
    """The program rewrites the variable's text in place (no setenv) to name a pipe of its own, before the first
    CUDA call: the preloaded library read the name at load, and writes to the verifier's pipe."""
    result = _run(*host_and_library, mode="divert")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.pipes[FD_ENV].splitlines()]
    assert lines[0]["kind"] == "start" and lines[0]["early"] == 1 and lines[1]["kind"] == "meta"


@pytest.mark.nvcc
def test_a_library_the_driver_loads_late_says_so(host_and_library):
    """Not preloaded (loaded at the first CUDA call, as the driver does): its meta line says early 0, which the
    sealed reader refuses."""
    result = _run(*host_and_library, mode="late", preload=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.pipes[FD_ENV].splitlines()[0])["early"] == 0


@pytest.mark.nvcc
def test_the_same_pipe_named_exactly_is_written(host_and_library):  # the control for the test above
    result = _run(*host_and_library, mode="copy", pipes=("OTHER_PIPE",), preload=False)
    assert result.returncode == 0, result.stderr
    assert result.pipes["OTHER_PIPE"].startswith(b'{"kind":"start","pid":')
