"""The sandbox, tested with plain host programs that misbehave on purpose."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from kernelloop.tools.sandbox import (
    Limits,
    available_isolation,
    private_workdir,
    run_sandboxed,
    scrubbed_env,
    stage_file,
)

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")


def build(tmp_path: Path, name: str, source: str) -> Path:
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    exe = tmp_path / name
    subprocess.run(["cc", "-O1", "-o", str(exe), str(src)], check=True, capture_output=True)
    return exe


def run(exe: Path, limits: Limits, env: dict[str, str] | None = None):
    with private_workdir() as work:
        staged = stage_file(exe, work)
        os.chmod(staged, 0o755)
        return run_sandboxed([str(staged)], workdir=work, limits=limits, env=env)


def test_a_well_behaved_program_runs(tmp_path):
    exe = build(tmp_path, "ok", '#include <stdio.h>\nint main(){printf("hello 42\\n");fprintf(stderr,"KERNEL_MS: 1.5\\n");return 0;}')
    r = run(exe, Limits(wall_timeout_s=10))
    assert r.ok and r.stdout == "hello 42\n" and "KERNEL_MS: 1.5" in r.stderr and r.failure() is None


def test_infinite_loop_is_killed_at_the_wall_timeout(tmp_path):
    exe = build(tmp_path, "spin", "int main(){volatile int x=0; for(;;) x++;}")
    t = time.monotonic()
    r = run(exe, Limits(wall_timeout_s=1.5))
    assert r.timed_out and not r.ok and "timed out" in r.failure()
    assert time.monotonic() - t < 8


def test_children_left_behind_are_killed_with_the_group(tmp_path):
    marker = tmp_path / "alive"
    exe = build(tmp_path, "orphan", f"""
#include <unistd.h>
#include <stdio.h>
int main(){{ if (fork()==0) {{ sleep(3); FILE* f=fopen("{marker}","w"); if(f) fputs("x",f); return 0; }} return 0; }}""")
    os.chmod(tmp_path, 0o777)
    r = run(exe, Limits(wall_timeout_s=5))
    assert r.returncode == 0
    time.sleep(4)
    assert not marker.exists(), "a child outlived the run"


def test_fork_bomb_is_contained(tmp_path):
    exe = build(tmp_path, "bomb", """
#include <unistd.h>
#include <stdio.h>
int main(){ int n=0; for(int i=0;i<100000;i++){ pid_t p=fork(); if(p==0){ pause(); return 0; } if(p<0) break; n++; }
printf("forked %d\\n", n); return 0; }""")
    r = run(exe, Limits(wall_timeout_s=20, max_processes=64))
    forked = int(r.stdout.split()[1]) if r.stdout.startswith("forked") else 0
    _, dropped = available_isolation()
    if dropped:  # NPROC counts only the sandbox user's processes
        assert forked < 64
    assert forked < 100000  # the process limit or the timeout stopped it
    # and nothing is left running
    assert subprocess.run(["pgrep", "-f", str(tmp_path / "bomb")], capture_output=True).stdout == b""


def test_stdout_flood_is_capped_and_killed(tmp_path):
    exe = build(tmp_path, "flood", '#include <stdio.h>\nint main(){char b[65536]; for(int i=0;i<65536;i++) b[i]=\'x\';'
                                   ' for(long i=0;i<16384;i++) fwrite(b,1,65536,stdout); return 0;}')  # 1 GiB
    r = run(exe, Limits(wall_timeout_s=30, stdout_cap_bytes=1 << 20))
    assert r.flooded and not r.ok and "flood" in r.failure()
    assert len(r.stdout) <= 1 << 20


def test_memory_hog_fails_under_the_data_limit(tmp_path):
    exe = build(tmp_path, "hog", """
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
int main(){ size_t n = (size_t)2 << 30; char* p = malloc(n); if(!p){ puts("refused"); return 3; } memset(p, 1, n); return 0; }""")
    r = run(exe, Limits(wall_timeout_s=20, memory_bytes=256 << 20))
    assert not r.ok and (r.returncode == 3 or r.signal is not None)


def test_file_size_limit(tmp_path):
    exe = build(tmp_path, "bigfile", """
#include <stdio.h>
int main(){ FILE* f=fopen("big.bin","wb"); char b[65536]={0}; for(int i=0;i<1024;i++) if(fwrite(b,1,sizeof b,f)!=sizeof b) return 4; return 0; }""")
    r = run(exe, Limits(wall_timeout_s=20, file_size_bytes=1 << 20))
    assert not r.ok  # SIGXFSZ or a short write


def test_environment_is_scrubbed_of_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("NVIDIA_API_KEY", "nvapi-very-secret-value")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-also-secret")
    monkeypatch.setenv("SOME_HARMLESS_VAR", "hello")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/x:nvapi-very-secret-value")  # a secret smuggled in a value
    exe = build(tmp_path, "env", '#include <stdio.h>\nextern char** environ;\nint main(){for(char** e=environ;*e;e++) puts(*e); return 0;}')
    r = run(exe, Limits(wall_timeout_s=10), env={"KERNELLOOP_SEED": "7"})
    assert "secret" not in r.stdout and "API_KEY" not in r.stdout
    assert "SOME_HARMLESS_VAR" not in r.stdout and "LD_LIBRARY_PATH" not in r.stdout
    assert "KERNELLOOP_SEED=7" in r.stdout


def test_scrubbed_env_refuses_secret_names(tmp_path):
    with pytest.raises(ValueError):
        scrubbed_env({"MY_TOKEN": "x"}, home=tmp_path)


def test_network_is_unreachable_in_a_namespace(tmp_path):
    flags, _ = available_isolation()
    if not flags:
        pytest.skip("this machine allows no network namespace")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    exe = build(tmp_path, "net", f"""
#include <stdio.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
int main(){{ int s=socket(AF_INET,SOCK_STREAM,0); struct sockaddr_in a={{0}}; a.sin_family=AF_INET; a.sin_port=htons({port});
inet_pton(AF_INET,"127.0.0.1",&a.sin_addr); int rc=connect(s,(struct sockaddr*)&a,sizeof a); printf("connect %d\\n", rc); return rc==0; }}""")
    r = run(exe, Limits(wall_timeout_s=10))
    server.close()
    assert "connect -1" in r.stdout and not accepted


def test_unprivileged_user_cannot_read_root_files(tmp_path):
    _, dropped = available_isolation()
    if not dropped:
        pytest.skip("not running as root: no uid drop to test")
    secret = tmp_path / "dot.env"
    secret.write_text("NVIDIA_API_KEY=nvapi-xyz\n")
    os.chmod(secret, 0o600)
    exe = build(tmp_path, "reader", f'#include <stdio.h>\nint main(){{FILE* f=fopen("{secret}","r"); puts(f? "read":"denied"); return 0;}}')
    os.chmod(tmp_path, 0o755)
    r = run(exe, Limits(wall_timeout_s=10))
    assert r.stdout.strip() == "denied"


def test_a_program_that_cannot_start_is_reported_not_raised(tmp_path):
    with private_workdir() as work:
        r = run_sandboxed([str(tmp_path / "missing")], workdir=work, limits=Limits(wall_timeout_s=5))
    assert not r.ok and r.returncode != 0


def test_a_process_that_leaves_the_group_is_swept(tmp_path):
    _, dropped = available_isolation()
    if not dropped:
        pytest.skip("not running as root: no sandbox uid to sweep")
    exe = build(tmp_path, "escapee", """
#include <unistd.h>
int main(){ if (fork()==0) { setsid(); if (fork()==0) { sleep(30); return 0; } return 0; } sleep(1); return 0; }""")
    from kernelloop.tools.sandbox import _processes_of

    with private_workdir() as work:
        staged = stage_file(exe, work)
        os.chmod(staged, 0o755)
        uid = work.stat().st_uid
        r = run_sandboxed([str(staged)], workdir=work, limits=Limits(wall_timeout_s=10))
        assert r.returncode == 0 and not r.timed_out and r.wall_s < 5  # the held pipes do not stall it
        assert _processes_of(uid) == []
