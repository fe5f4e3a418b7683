"""NVIDIA retrieval embeddings and reranking (the `nim` extra: langchain-nvidia-ai-endpoints).

Used when NVIDIA_API_KEY is set (environment, or ./.env via
:func:`kernelloop.llm_config.resolve_llm_config`) and the package is importable; see
:func:`kernelloop.corpus.dense.backend` for the KERNELLOOP_EMBEDDINGS switch.

* embeddings: ``NVIDIAEmbeddings(model=KERNELLOOP_NIM_EMBED_MODEL)``; chunks are embedded
  with ``input_type="passage"`` (``embed_documents``), queries with ``"query"``
  (``embed_query``). Vectors are L2-normalised here, so cosine = dot product.
* reranking: ``NVIDIARerank(model=KERNELLOOP_NIM_RERANK_MODEL).compress_documents(documents,
  query)``; each returned Document carries ``metadata["relevance_score"]`` (the logit).
  Set KERNELLOOP_NIM_RERANK_MODEL=off to skip reranking.
* base URL: KERNELLOOP_NIM_BASE_URL (default NVIDIA's hosted https://integrate.api.nvidia.com/v1;
  the package appends /embeddings and /ranking, or uses a model's registered endpoint).

The clients are built lazily, on first use, inside the same error handling as the calls:
with a model the package does not know, construction itself GETs {base_url}/models.
The package's usage telemetry is switched off. Each HTTP request has a 20 s timeout;
transient failures (timeouts, connection errors, 429, 5xx) are tried at most 3 times with
exponential backoff (tenacity); 401/403/404 are not retried. Every failure becomes a
:class:`NimError` whose message is one line and never contains the key.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import SecretStr

BACKEND = "nvidia"
DEFAULT_EMBED_MODEL = "nvidia/nv-embedqa-e5-v5"
DEFAULT_RERANK_MODEL = "nvidia/nv-rerankqa-mistral-4b-v3"
DEFAULT_BASE_URL = "https://integrate.api.nvidia.com/v1"
# The hosted reranker lives on its own endpoint, which langchain-nvidia-ai-endpoints 1.5
# does not list for this model (it is missing from its model table).
HOSTED_RERANK_ENDPOINTS = {
    "nvidia/nv-rerankqa-mistral-4b-v3":
        "https://ai.api.nvidia.com/v1/retrieval/nvidia/nv-rerankqa-mistral-4b-v3/reranking",
}
PACKAGE = "langchain_nvidia_ai_endpoints"
TIMEOUT_S = 20.0
TRIES = 3
BACKOFF_S = 0.5  # first wait; doubles, at most MAX_BACKOFF_S
MAX_BACKOFF_S = 4.0
COOLDOWN_S = 60.0  # after a failure, go straight to the fallback for this long
EMBED_MODEL_ENV = "KERNELLOOP_NIM_EMBED_MODEL"
RERANK_MODEL_ENV = "KERNELLOOP_NIM_RERANK_MODEL"
BASE_URL_ENV = "KERNELLOOP_NIM_BASE_URL"

_lock = threading.Lock()
_clients: dict[tuple, Any] = {}
_failed: dict[tuple, tuple[float, str]] = {}  # (what, settings key) -> (when, message)
_cache: dict[tuple[str, str], np.ndarray] = {}  # (model, text hash) -> passage vector
last_warning: str | None = None  # the latest fallback, for CorpusStats.warnings


class NimError(RuntimeError):
    """An NVIDIA endpoint could not be used; the message is one line without the key."""


@dataclass(frozen=True)
class NimSettings:
    api_key: SecretStr | None
    embed_model: str
    rerank_model: str | None  # None: no reranking
    base_url: str

    @property
    def key_id(self) -> str:
        """Distinguishes keys in caches without holding the key itself."""
        if self.api_key is None:
            return ""
        return hashlib.sha256(self.api_key.get_secret_value().encode()).hexdigest()[:16]

    @property
    def hosted(self) -> bool:
        from ..llm_config import is_nvidia_hosted

        return is_nvidia_hosted(self.base_url)


def settings() -> NimSettings:
    from ..errors import ConfigError
    from ..llm_config import resolve_llm_config

    try:
        key = resolve_llm_config().api_key
    except ConfigError:
        key = None
    from ..config import environment_value

    rerank = environment_value(RERANK_MODEL_ENV) or DEFAULT_RERANK_MODEL
    return NimSettings(
        api_key=key,
        embed_model=environment_value(EMBED_MODEL_ENV) or DEFAULT_EMBED_MODEL,
        rerank_model=None if rerank.lower() in ("0", "off", "none", "false", "no") else rerank,
        base_url=(environment_value(BASE_URL_ENV) or DEFAULT_BASE_URL).rstrip("/"),
    )


def importable() -> bool:
    return importlib.util.find_spec(PACKAGE) is not None


def has_key() -> bool:
    return settings().api_key is not None


def configured() -> bool:
    """A key is set and the package is importable (no network is touched)."""
    return has_key() and importable()


def cache_model(s: NimSettings | None = None) -> str:
    """The `model` column of the embeddings table for NVIDIA vectors: backend-prefixed, so
    they never mix with the local model's."""
    s = s or settings()
    return f"{BACKEND}:{s.embed_model}"


def describe(s: NimSettings | None = None) -> str:
    s = s or settings()
    rerank = f", rerank {s.rerank_model}" if s.rerank_model else ""
    return f"{BACKEND}:{s.embed_model}{rerank}"


def reset() -> None:
    """Forget clients, cached vectors and recent failures (tests; a changed key)."""
    global last_warning
    with _lock:
        _clients.clear()
        _failed.clear()
        _cache.clear()
        last_warning = None


# -- errors --------------------------------------------------------------------------------

_STATUS = re.compile(r"\[(\d{3})\]|\b(\d{3}) (?:Client|Server) Error")


def _status(exc: BaseException) -> int | None:
    resp = getattr(exc, "response", None)
    code = getattr(resp, "status_code", None)
    if isinstance(code, int):
        return code
    m = _STATUS.search(str(exc))
    if m:
        return int(m.group(1) or m.group(2))
    return None


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, NimError):
        return False
    code = _status(exc)
    if code is not None:
        return code == 429 or code >= 500
    try:
        import requests

        if isinstance(exc, (requests.ConnectionError, requests.Timeout)):
            return True
    except ImportError:  # pragma: no cover
        pass
    return isinstance(exc, (TimeoutError, ConnectionError))


def _clean(exc: BaseException, s: NimSettings) -> str:
    """One line, at most ~160 characters, the key (if it appears at all) masked."""
    code = _status(exc)
    text = " ".join(str(exc).split())
    if s.api_key is not None:
        secret = s.api_key.get_secret_value()
        if secret:
            text = text.replace(secret, "**********")
    text = re.sub(r"nvapi-[A-Za-z0-9_\-]+", "nvapi-**********", text)
    text = re.sub(r"(?i)bearer\s+\S+", "Bearer **********", text)
    if code == 401:
        head = "HTTP 401 (the API key was refused)"
    elif code is not None:
        head = f"HTTP {code}"
    else:
        head = type(exc).__name__
    if len(text) > 140:
        text = text[:139] + "…"
    return f"{head}: {text}" if text else head


def _call(what: str, s: NimSettings, fn: Any) -> Any:
    """fn() with retries on transient failures; any failure becomes a NimError."""
    key = (what, s.key_id, s.base_url, s.embed_model, s.rerank_model)
    with _lock:
        failed = _failed.get(key)
    if failed is not None and time.monotonic() - failed[0] < COOLDOWN_S:
        raise NimError(failed[1])
    try:
        from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

        retrying = Retrying(stop=stop_after_attempt(TRIES), reraise=True,
                            wait=wait_exponential(multiplier=BACKOFF_S, max=MAX_BACKOFF_S),
                            retry=retry_if_exception(_transient))
        result = retrying(fn)
    except ImportError as exc:
        msg = f"{type(exc).__name__}: {exc} (pip install 'kernelloop[nim]')"
        with _lock:
            _failed[key] = (time.monotonic(), msg)
        raise NimError(msg) from None
    except Exception as exc:
        msg = _clean(exc, s)
        with _lock:
            _failed[key] = (time.monotonic(), msg)
        raise NimError(msg) from None
    with _lock:
        _failed.pop(key, None)
    return result


# -- clients (built lazily) ------------------------------------------------------------------

def _tune(client: Any) -> Any:
    inner = getattr(client, "_client", None)
    if inner is not None:  # the requests timeout (and the 202-polling limit)
        try:
            inner.timeout = TIMEOUT_S
        except Exception:  # pragma: no cover - a future version may freeze it
            pass
    return client


def _embedder(s: NimSettings) -> Any:
    key = ("embed", s.key_id, s.base_url, s.embed_model)
    with _lock:
        if key in _clients:
            return _clients[key]
    import warnings

    from langchain_nvidia_ai_endpoints import NVIDIAEmbeddings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "model unknown" and the like: a library prints nothing
        client = NVIDIAEmbeddings(model=s.embed_model, api_key=s.api_key.get_secret_value() if s.api_key else None,
                                  base_url=s.base_url, truncate="END", usage_telemetry_enabled=False)
    _tune(client)
    with _lock:
        _clients[key] = client
    return client


def _reranker(s: NimSettings, top_n: int) -> Any:
    key = ("rerank", s.key_id, s.base_url, s.rerank_model)
    with _lock:
        client = _clients.get(key)
    if client is None:
        import warnings

        from langchain_nvidia_ai_endpoints import Model, NVIDIARerank, register_model
        from langchain_nvidia_ai_endpoints._statics import MODEL_TABLE

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if s.hosted and s.rerank_model in HOSTED_RERANK_ENDPOINTS and s.rerank_model not in MODEL_TABLE:
                register_model(Model(id=s.rerank_model, model_type="ranking", client="NVIDIARerank",
                                     endpoint=HOSTED_RERANK_ENDPOINTS[s.rerank_model]))
            client = NVIDIARerank(model=s.rerank_model, api_key=s.api_key.get_secret_value() if s.api_key else None,
                                  base_url=s.base_url, truncate="END", top_n=top_n,
                                  usage_telemetry_enabled=False)
        _tune(client)
        with _lock:
            _clients[key] = client
    client.top_n = top_n
    return client


def _unit(vecs: Any) -> np.ndarray:
    arr = np.asarray(vecs, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return arr / np.where(norms > 0, norms, 1.0)


# -- public --------------------------------------------------------------------------------

def embed_passages(hashes: list[str], texts: list[str], s: NimSettings | None = None) -> np.ndarray:
    """float32 [n, dim], unit length; input_type "passage". Raises NimError."""
    s = s or settings()
    missing = [i for i, h in enumerate(hashes) if (s.embed_model, h) not in _cache]
    if missing:
        batch = [texts[i] for i in missing]
        vecs = _call("embed", s, lambda: _unit(_embedder(s).embed_documents(batch)))
        if len(vecs) != len(batch):
            raise NimError(f"the embeddings endpoint returned {len(vecs)} vectors for {len(batch)} texts")
        for i, v in zip(missing, vecs, strict=True):
            _cache[(s.embed_model, hashes[i])] = v
    if not hashes:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([_cache[(s.embed_model, h)] for h in hashes])


def embed_query(text: str, s: NimSettings | None = None) -> np.ndarray:
    """float32 [dim], unit length; input_type "query". Raises NimError."""
    s = s or settings()
    return _call("embed", s, lambda: _unit(_embedder(s).embed_query(text))[0])


def rerank(query: str, passages: list[str], s: NimSettings | None = None) -> list[tuple[int, float]]:
    """(index into passages, relevance score), most relevant first. Raises NimError."""
    s = s or settings()
    if not passages or not s.rerank_model:
        return []

    def run() -> list[tuple[int, float]]:
        from langchain_core.documents import Document

        docs = [Document(page_content=p, metadata={"i": i}) for i, p in enumerate(passages)]
        ranked = _reranker(s, len(docs)).compress_documents(documents=docs, query=query)
        return [(int(d.metadata["i"]), float(d.metadata["relevance_score"])) for d in ranked]

    return _call("rerank", s, run)


def note_fallback(message: str | None) -> None:
    global last_warning
    last_warning = message
