"""NVIDIA retrieval embeddings and reranking (kernelloop.corpus.nvidia), against a fake
NIM served on 127.0.0.1: never NVIDIA's real service. Skipped without the `nim` extra."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

pytest.importorskip("langchain_nvidia_ai_endpoints")
pytest.importorskip("tenacity")

from kernelloop.config import Settings  # noqa: E402
from kernelloop.corpus import corpus_stats, dense, engine, nvidia, search  # noqa: E402

KEY = "nvapi-test-xxxx"
DIM = 16
WORD = re.compile(r"[a-z0-9]+")


def _vector(text: str, input_type: str) -> list[float]:
    """Deterministic, hash-seeded bag of words: texts that share words point alike."""
    v = np.zeros(DIM, dtype=np.float64)
    for w in WORD.findall(text.lower()):
        seed = int.from_bytes(hashlib.sha256(w.encode()).digest()[:4], "little")
        v += np.random.default_rng(seed).standard_normal(DIM)
    if input_type == "query":  # asymmetric models embed queries differently; keep it visible
        v[0] += 0.01
    n = np.linalg.norm(v)
    return (v / n if n else v).tolist()


class FakeNim:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.status = 200
        self.favor: str | None = None  # the passage containing this ranks first
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                if outer.status != 200:
                    return self._send(outer.status, {"status": outer.status, "title": "Unauthorized"
                                                     if outer.status == 401 else "Server Error",
                                                     "detail": f"key {self.headers.get('Authorization')} refused"})
                if self.path == "/v1/embeddings":
                    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    data = [{"object": "embedding", "index": i, "embedding": _vector(t, body.get("input_type", ""))}
                            for i, t in enumerate(inputs)]
                    return self._send(200, {"object": "list", "data": data, "model": body.get("model"),
                                            "usage": {"prompt_tokens": 1, "total_tokens": 1}})
                if self.path == "/v1/ranking":
                    passages = [p["text"] for p in body["passages"]]
                    scores = [(10.0 if outer.favor and outer.favor in p else -float(i)) for i, p in enumerate(passages)]
                    order = sorted(range(len(passages)), key=lambda i: -scores[i])
                    return self._send(200, {"rankings": [{"index": i, "logit": scores[i]} for i in order]})
                self._send(404, {"status": 404, "title": "Not Found", "detail": self.path})

            def _send(self, code: int, payload: dict) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    server = FakeNim()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def nim_env(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no ./.env of the developer's
    for var in ("KERNELLOOP_CORPUS_DENSE", "KERNELLOOP_EMBEDDINGS", "KERNELLOOP_NIM_EMBED_MODEL",
                "KERNELLOOP_NIM_RERANK_MODEL", "KERNELLOOP_NIM_BASE_URL", "NVIDIA_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NVIDIA_API_KEY", KEY)
    monkeypatch.setenv("NVIDIA_USAGE_TELEMETRY_ENABLED", "0")
    monkeypatch.setattr(nvidia, "BACKOFF_S", 0.01)
    nvidia.reset()
    engine._states.clear()
    yield
    nvidia.reset()
    engine._states.clear()


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(cache_dir=tmp_path / "cache", data_dir=tmp_path / "data")


def _point_at(monkeypatch, url: str) -> None:
    monkeypatch.setenv("KERNELLOOP_NIM_BASE_URL", url)


QUERY = "shared memory bank conflicts in tiled matrix multiply"


def test_auto_picks_nvidia_and_sends_key_and_input_types(fake, monkeypatch, settings):
    _point_at(monkeypatch, fake.url)
    assert dense.backend() == "nvidia"
    hits = search(QUERY, k=5, settings=settings)
    assert hits and all(h.retriever in ("hybrid", "hybrid+rerank") for h in hits)
    assert {r["auth"] for r in fake.requests} == {f"Bearer {KEY}"}
    embeds = [r["body"] for r in fake.requests if r["path"] == "/v1/embeddings"]
    assert any(b["input_type"] == "passage" for b in embeds)
    queries = [b for b in embeds if b["input_type"] == "query"]
    assert queries and all(b["input"] == [QUERY] for b in queries)
    assert all(b["model"] == nvidia.DEFAULT_EMBED_MODEL for b in embeds)
    ranks = [r["body"] for r in fake.requests if r["path"] == "/v1/ranking"]
    assert ranks and ranks[0]["query"] == {"text": QUERY} and ranks[0]["model"] == nvidia.DEFAULT_RERANK_MODEL

    stats = corpus_stats(settings)
    assert stats.dense and stats.dense.startswith("nvidia:nvidia/nv-embedqa-e5-v5")
    assert stats.embedded_chunks == stats.chunks and not stats.warnings
    # the vectors are cached under the backend-prefixed model, apart from the local model's
    import sqlite3
    conn = sqlite3.connect(stats.index_path)
    models = {m for (m,) in conn.execute("SELECT DISTINCT model FROM embeddings")}
    conn.close()
    assert models == {"nvidia:nvidia/nv-embedqa-e5-v5"}

    # a second search in a fresh process state reads the vectors back: only the query is embedded
    engine._states.clear()
    nvidia.reset()
    fake.requests.clear()
    search("warp divergence", k=3, settings=settings)
    assert all(r["body"]["input_type"] == "query" for r in fake.requests if r["path"] == "/v1/embeddings")


def test_reranker_reorders(fake, monkeypatch, settings):
    _point_at(monkeypatch, fake.url)
    monkeypatch.setenv("KERNELLOOP_NIM_RERANK_MODEL", "off")
    plain = search(QUERY, k=5, settings=settings)
    assert len(plain) >= 3 and all(h.retriever == "hybrid" for h in plain)
    assert not any(r["path"] == "/v1/ranking" for r in fake.requests)
    target = plain[2]
    fake.favor = target.chunk.strip()[:60]
    monkeypatch.delenv("KERNELLOOP_NIM_RERANK_MODEL")
    reranked = search(QUERY, k=5, settings=settings)
    assert reranked[0].doc_id == target.doc_id
    assert reranked[0].retriever == "hybrid+rerank" and reranked[0].score == 10.0
    assert [h.doc_id for h in reranked] != [h.doc_id for h in plain]


def _assert_bm25_fallback(hits, stats_warnings) -> None:
    assert hits, "BM25 must still answer"
    assert all(h.retriever.startswith("bm25 (NVIDIA embeddings unavailable:") for h in hits)
    messages = [h.retriever for h in hits] + list(stats_warnings)
    assert all(KEY not in m and "xxxx" not in m for m in messages)
    assert all("\n" not in m for m in messages)


def test_401_falls_back_to_bm25_without_leaking_the_key(fake, monkeypatch, settings):
    _point_at(monkeypatch, fake.url)
    monkeypatch.setenv("KERNELLOOP_EMBEDDINGS", "nvidia")  # no local fallback: BM25
    fake.status = 401
    hits = search(QUERY, k=5, settings=settings)
    stats = corpus_stats(settings)
    _assert_bm25_fallback(hits, stats.warnings)
    assert any("401" in w for w in stats.warnings)
    assert len([r for r in fake.requests if r["path"] == "/v1/embeddings"]) == 1  # 401 is not retried


def test_5xx_is_retried_then_falls_back(fake, monkeypatch, settings):
    _point_at(monkeypatch, fake.url)
    monkeypatch.setenv("KERNELLOOP_EMBEDDINGS", "nvidia")
    fake.status = 503
    hits = search(QUERY, k=5, settings=settings)
    _assert_bm25_fallback(hits, corpus_stats(settings).warnings)
    assert len(fake.requests) == nvidia.TRIES


def test_server_down_falls_back_to_bm25(monkeypatch, settings):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _point_at(monkeypatch, f"http://127.0.0.1:{port}/v1")  # nothing listens there now
    monkeypatch.setenv("KERNELLOOP_EMBEDDINGS", "nvidia")
    hits = search(QUERY, k=5, settings=settings)
    stats = corpus_stats(settings)
    _assert_bm25_fallback(hits, stats.warnings)
    assert stats.warnings and "NVIDIA embeddings unavailable" in stats.warnings[-1]


def test_rerank_failure_keeps_fused_order(fake, monkeypatch, settings):
    _point_at(monkeypatch, fake.url)
    search(QUERY, k=5, settings=settings)  # embeds everything
    fake.status = 500
    fake.requests.clear()
    engine._states.clear()
    nvidia.reset()
    monkeypatch.setattr(nvidia, "embed_query", lambda text, s=None: np.asarray(_vector(text, "query"),
                                                                                dtype=np.float32))
    hits = search(QUERY, k=5, settings=settings)
    assert hits and all(h.retriever.startswith("hybrid (NVIDIA rerank unavailable:") for h in hits)
    assert all(KEY not in h.retriever for h in hits)


def test_switches(monkeypatch, fake):
    _point_at(monkeypatch, fake.url)
    monkeypatch.setenv("KERNELLOOP_EMBEDDINGS", "off")
    assert dense.backend() is None
    monkeypatch.setenv("KERNELLOOP_EMBEDDINGS", "nvidia")
    assert dense.backend() == "nvidia"
    monkeypatch.setenv("KERNELLOOP_CORPUS_DENSE", "off")
    assert dense.backend() is None
    monkeypatch.delenv("KERNELLOOP_CORPUS_DENSE")
    monkeypatch.delenv("NVIDIA_API_KEY")
    assert dense.backend() is None and "NVIDIA_API_KEY" in dense.unavailable_reason()
    (__import__("pathlib").Path.cwd() / ".env").write_text(f"NVIDIA_API_KEY={KEY}\n")
    assert dense.backend() == "nvidia"  # ./.env counts, as for the optimizer's LLM
    s = nvidia.settings()
    assert KEY not in repr(s) and s.base_url == fake.url
