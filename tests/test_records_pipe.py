"""The v2 header's records travel through a pipe the verifier reads while the program runs (red team
round 291: frozen code rewrote a records file after the run). Tested with host programs that write
the stream as kernelloop_harness.cuh does, then add to it, silence it, or hand over a file instead."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelloop.tools.sandbox import Limits, private_workdir, run_sandboxed, stage_file
from kernelloop.verify.comparing import run_failure
from kernelloop.verify.outputs import DumpError
from kernelloop.verify.program_run import V2_HEADER_MARK, carries_v2_header, run_program
from kernelloop.verify.records import parse_header_records, read_records

MANIFEST = json.dumps({"contract": 2, "warmup": 1, "calls": 1, "buffers": [
    {"name": "y", "role": "output", "dtype": "float32", "count": 2}]}).encode()


def header_stream(values: bytes = b"\0\0\x80?\0\0\0@") -> bytes:
    body = b"kernelloop-manifest 2 %d\n" % len(MANIFEST) + MANIFEST
    body += b"kernelloop-output 1 float32 2\n" + values
    return body + b"kernelloop-end 2 %d\n" % len(body)


def test_the_headers_stream_is_read_whole():
    records = parse_header_records(header_stream())
    assert records.manifest.calls == 1 and records.outputs[0].tolist() == [1.0, 2.0]


@pytest.mark.parametrize("stream, said", [
    (header_stream() + b"kernelloop-output 1 float32 2\n" + b"\0" * 8, "end record"),  # added after the run
    (header_stream() + header_stream(), "other code"),  # a second stream after the first
    (header_stream()[:-20], "end record"),  # stopped early
    (b"kernelloop-output 1 float32 2\n" + b"\0" * 8 + header_stream(), "counts"),  # written before the harness
    (b"", "end record"),
])
def test_anything_but_exactly_the_headers_bytes_voids_the_records(stream, said):
    with pytest.raises(DumpError, match=said):
        parse_header_records(stream)


def test_a_stream_not_beginning_with_the_manifest_is_refused_even_where_the_count_fits():
    body = b"kernelloop-output 1 float32 2\n" + b"\0" * 8
    with pytest.raises(DumpError, match="manifest"):
        parse_header_records(body + b"kernelloop-end 2 %d\n" % len(body))


def test_a_v1_file_holds_whole_outputs_only(tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(b"kernelloop-output 1 float32 1\n" + b"\0" * 4)
    assert read_records(path).outputs[0].tolist() == [0.0]
    path.write_bytes(header_stream())  # a manifest in a file: code without the header declaring what it likes
    with pytest.raises(DumpError, match="other than a whole output"):
        read_records(path)


# A host program writing the stream as the header does (fstat of the descriptor, then write), then
# doing what frozen code after h.run could: MODE 1 appends a record, 2 closes the pipe and writes the
# v1 file instead (the header silenced), 3 writes a forged stream before the header's.
WRITER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static const char* mark = "%MARK%\n";
static int fd = -1;
static unsigned long long written = 0;
static void put(const void* p, size_t n) { if (write(fd, p, n) != (ssize_t)n) exit(5); written += n; }
static void put_stream(const char* json, const float* y) {
  char line[128];
  snprintf(line, sizeof line, "kernelloop-manifest 2 %zu\n", strlen(json)); put(line, strlen(line));
  put(json, strlen(json));
  snprintf(line, sizeof line, "kernelloop-output 1 float32 2\n"); put(line, strlen(line));
  put(y, 8);
}
int main(void) {
  volatile int mode = MODE;  /* read at run time: every path stays in the binary, the header's literal too */
  const char* spec = getenv("KERNELLOOP_OUTPUT_FD");
  const char* file = getenv("KERNELLOOP_OUTPUT_FILE");
  unsigned long long dev, ino; struct stat info;
  if (spec == NULL || sscanf(spec, "%d:%llu:%llu", &fd, &dev, &ino) != 3) return 3;
  if (fstat(fd, &info) != 0 || !S_ISFIFO(info.st_mode) || info.st_ino != ino || info.st_dev != dev) return 4;
  const char* json = "%JSON%";
  float honest[2] = {1.0f, 2.0f}, forged[2] = {7.0f, 7.0f};
  if (mode == 2) {  /* the header silenced: the dump a v1 harness would write, where the verifier puts it */
    FILE* f = fopen(file != NULL ? file : "output.bin", "wb");
    fwrite("kernelloop-output 1 float32 2\n", 1, 30, f); fwrite(forged, 4, 2, f); fclose(f);
    fprintf(stderr, "\nKERNEL_MS: 1.0\n");
    return 0;
  }
  if (mode == 3) { put_stream(json, forged); written = 0; }
  put_stream(json, honest);
  char line[64];
  snprintf(line, sizeof line, mark, written); put(line, strlen(line));
  if (mode == 1) put_stream(json, forged);
  fprintf(stderr, "\nKERNEL_MS: 1.0\n");
  return 0;
}
"""


def writer(tmp_path: Path, mode: int) -> Path:
    source = (WRITER.replace("%MARK%", V2_HEADER_MARK.decode()).replace("MODE", str(mode))
              .replace("%JSON%", MANIFEST.decode().replace('"', '\\"')))
    src, exe = tmp_path / f"w{mode}.c", tmp_path / f"w{mode}"
    src.write_text(source)
    subprocess.run(["cc", "-O1", "-o", str(exe), str(src)], check=True, capture_output=True)
    return exe


needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")


@needs_cc
def test_the_pipe_carries_the_records_of_a_binary_with_the_header(tmp_path):
    exe = writer(tmp_path, 0)
    assert carries_v2_header(exe)
    run = run_program(exe, seed=1, limits=Limits(wall_timeout_s=20))
    assert run_failure(run) is None and run.dump[0].tolist() == [1.0, 2.0] and run.records.manifest.calls == 1


@needs_cc
@pytest.mark.parametrize("mode", [1, 2, 3])
def test_records_added_silenced_or_forged_first_fail_the_run(tmp_path, mode):
    run = run_program(writer(tmp_path, mode), seed=1, limits=Limits(wall_timeout_s=20))
    assert run.result.ok and run.dump is None and run_failure(run)[1].startswith("its records:")


@needs_cc
def test_a_records_flood_is_capped_like_a_file(tmp_path):
    src, exe = tmp_path / "flood.c", tmp_path / "flood"
    src.write_text('#include <stdlib.h>\n#include <unistd.h>\nint main(void){ int fd = atoi(getenv("R")); '
                   'static char b[65536]; for (int i = 0; i < 1024; i++) if (write(fd, b, sizeof b) < 0) return 4; '
                   'return 0; }')
    subprocess.run(["cc", "-O1", "-o", str(exe), str(src)], check=True, capture_output=True)
    with private_workdir() as work:
        staged = stage_file(exe, work)
        result = run_sandboxed([str(staged)], workdir=work, limits=Limits(wall_timeout_s=20, file_size_bytes=1 << 20),
                               pipes=("R",))
    assert result.flooded and not result.ok and len(result.pipes["R"]) <= 1 << 20
