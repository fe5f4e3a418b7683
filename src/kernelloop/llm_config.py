"""Which LLM endpoint, model and API key the optimizer uses, and where each came from.

One precedence rule, as everywhere in kernelloop: CLI flag > environment > ./.env > defaults.

* key:      ``--api-key`` > ``$NVIDIA_API_KEY`` > ``NVIDIA_API_KEY`` in ./.env > none
* model:    ``--model`` > ``$KERNELLOOP_MODEL`` > ./.env > :data:`DEFAULT_MODEL`
* base url: ``--base-url`` > ``$KERNELLOOP_BASE_URL`` > ./.env > :data:`DEFAULT_BASE_URL`

The .env file is read from the current directory only (never a parent, never the
package directory) and never copied into ``os.environ``. The key is held as a
:class:`~pydantic.SecretStr`, so it shows as ``**********`` in ``repr``, logs and JSON;
:func:`mask_key` is the only form of it meant for people to see.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, SecretStr

from .errors import ConfigError

KEY_ENV = "NVIDIA_API_KEY"
MODEL_ENV = "KERNELLOOP_MODEL"
BASE_URL_ENV = "KERNELLOOP_BASE_URL"
ENV_FILE = ".env"

DEFAULT_MODEL = "nvidia/llama-3.3-nemotron-super-49b-v1"
DEFAULT_BASE_URL = "https://integrate.api.nvidia.com/v1"

# Chat model ids served at integrate.api.nvidia.com, checked offline by `kernelloop doctor`.
# A short curated list, not the catalog: a name missing here is only a warning, and
# `doctor --online` asks the service itself. Evidence found for each id (2026):
#   nvidia/llama-3.3-nemotron-super-49b-v1   NVIDIA docs (NeMo microservices model table: NIM
#                                            "nvidia/llama-3.3-nemotron-super-49b-v1"); build.nvidia.com page
#   deepseek-ai/deepseek-r1                  build.nvidia.com/deepseek-ai/deepseek-r1 and
#                                            docs.api.nvidia.com/nim/reference/deepseek-ai-deepseek-r1
#   mistralai/mixtral-8x22b-instruct-v0.1    docs.api.nvidia.com/nim/reference/mistralai-mixtral-8x22b-instruct-infer
#                                            and the NIM for LLMs model tables (Mixtral 8x22B Instruct v0.1)
#   meta/llama-3.1-405b-instruct             NIM for LLMs 1.1 model table (nvcr.io/nim/meta/llama-3.1-405b-instruct)
#   meta/llama-3.3-70b-instruct              NIM for LLMs model tables (Llama 3.3 70B Instruct); the exact
#                                            hosted id from third-party guides calling integrate.api.nvidia.com
#   nvidia/llama-3.1-nemotron-ultra-253b-v1  build.nvidia.com/nvidia/llama-3_1-nemotron-ultra-253b-v1 (page slug)
#                                            and NIM for LLMs 1.8 model list; exact id from third-party code
#   nvidia/nvidia-nemotron-nano-9b-v2        build.nvidia.com/nvidia/nvidia-nemotron-nano-9b-v2 (page slug); exact
#                                            id from code configured against integrate.api.nvidia.com
#   qwen/qwen2.5-coder-32b-instruct          build.nvidia.com/qwen/qwen2_5-coder-32b-instruct (page slug) and NIM
#                                            for LLMs 1.8 model list; exact id from third-party code
# (build.nvidia.com page slugs write "3_1" where the API id writes "3.1".)
KNOWN_NIM_CHAT_MODELS: tuple[str, ...] = (
    "nvidia/llama-3.3-nemotron-super-49b-v1",
    "nvidia/llama-3.1-nemotron-ultra-253b-v1",
    "nvidia/nvidia-nemotron-nano-9b-v2",
    "meta/llama-3.3-70b-instruct",
    "meta/llama-3.1-405b-instruct",
    "qwen/qwen2.5-coder-32b-instruct",
    "deepseek-ai/deepseek-r1",
    "mistralai/mixtral-8x22b-instruct-v0.1",
)

# Names people type that the service does not know (it answers 404, not 401).
# "nvidia/nemotron-nano-9b-v2" is what OpenRouter and others call the model NVIDIA serves
# as "nvidia/nvidia-nemotron-nano-9b-v2".
COMMON_MISTAKES: dict[str, str] = {
    "nvidia/nemotron-nano-9b-v2": "nvidia/nvidia-nemotron-nano-9b-v2",
}

KeySource = Literal["environment", ".env", "flag", "none"]
SOURCE_NAMES = {"flag": "--base-url", "environment": f"${BASE_URL_ENV}", ".env": f"{BASE_URL_ENV} in ./.env",
                "default": "the default"}


class LLMConfig(BaseModel):
    """The resolved endpoint settings. `api_key` never prints: use :func:`mask_key`."""

    model_config = ConfigDict(frozen=True)

    api_key: SecretStr | None = None
    model: str = DEFAULT_MODEL
    base_url: str = DEFAULT_BASE_URL
    key_source: KeySource = "none"
    base_url_source: Literal["flag", "environment", ".env", "default"] = "default"

    @property
    def masked_key(self) -> str:
        return mask_key(self.api_key.get_secret_value()) if self.api_key else "none"

    @property
    def nvidia_hosted(self) -> bool:
        return is_nvidia_hosted(self.base_url)


def mask_key(key: str) -> str:
    """What a person may see of a key: its first 4 characters and its length.

    A key shorter than 12 characters shows only its length (4 characters of it
    would be too large a share)."""
    if len(key) < 12:
        return f"… ({len(key)} chars)"
    return f"{key[:4]}… ({len(key)} chars)"


def base_url_problem(base_url: str) -> str | None:
    """Why `base_url` cannot be an OpenAI-compatible endpoint (one phrase), or None when it can."""
    try:
        parsed = urlparse(base_url)
        port = parsed.port  # raises on a port that is not a number
    except ValueError as exc:
        return f"is not a URL ({exc})"
    if parsed.scheme not in ("http", "https"):
        return "is not an http(s) URL" if parsed.scheme else "is not a URL (no http:// or https://)"
    if not parsed.hostname:
        return "names no host"
    if port == 0:
        return "names port 0"
    if parsed.query or parsed.fragment:
        return "carries a query or fragment (give the endpoint's base, e.g. https://host/v1)"
    return None


def is_nvidia_hosted(base_url: str) -> bool:
    """True for NVIDIA's hosted API (integrate.api.nvidia.com and its siblings)."""
    host = (urlparse(base_url).hostname or "").lower()
    return host == "api.nvidia.com" or host.endswith(".api.nvidia.com")


def env_file_path(cwd: Path | None = None) -> Path:
    """./.env of `cwd` (default: the current directory). Never a parent directory."""
    return (Path(cwd) if cwd is not None else Path.cwd()) / ENV_FILE


def read_env_file(cwd: Path | None = None) -> dict[str, str]:
    """The variables ./.env sets ({} when there is none), without touching os.environ.

    Raises ConfigError (one line, no values) when the file exists but cannot be read."""
    from dotenv import dotenv_values

    path = env_file_path(cwd)
    if not path.is_file():
        return {}
    try:
        values = dotenv_values(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it ({type(exc).__name__})") from None
    return {k: v for k, v in values.items() if v is not None}


def _first(*candidates: tuple[str | None, str]) -> tuple[str | None, str]:
    for value, source in candidates:
        if value is not None and value.strip():
            return value.strip(), source
    return None, "none"


def resolve_llm_config(
    cli_model: str | None = None,
    cli_base_url: str | None = None,
    cli_api_key: str | None = None,
    *,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
    dotenv: Mapping[str, str] | None = None,
) -> LLMConfig:
    """Resolve key, model and base URL: CLI flag > environment > ./.env > defaults.

    `environ` defaults to os.environ; `dotenv` to the values of ./.env in `cwd` (pass it
    when already read). Empty values count as unset (.env.example has `NVIDIA_API_KEY=`).
    """
    env = os.environ if environ is None else environ
    dot = read_env_file(cwd) if dotenv is None else dotenv
    key, key_source = _first((cli_api_key, "flag"), (env.get(KEY_ENV), "environment"), (dot.get(KEY_ENV), ".env"))
    model, _ = _first((cli_model, "flag"), (env.get(MODEL_ENV), "environment"), (dot.get(MODEL_ENV), ".env"))
    base_url, url_source = _first((cli_base_url, "flag"), (env.get(BASE_URL_ENV), "environment"),
                                  (dot.get(BASE_URL_ENV), ".env"))
    return LLMConfig(
        api_key=SecretStr(key) if key else None,
        model=model or DEFAULT_MODEL,
        base_url=(base_url or DEFAULT_BASE_URL).rstrip("/"),
        key_source=key_source if key else "none",  # type: ignore[arg-type]
        base_url_source=url_source if base_url else "default",  # type: ignore[arg-type]
    )


def suggest_model(name: str, known: tuple[str, ...] | list[str] = KNOWN_NIM_CHAT_MODELS) -> str | None:
    """The known model id `name` most likely meant, or None."""
    if name in COMMON_MISTAKES and COMMON_MISTAKES[name] in known:
        return COMMON_MISTAKES[name]
    lowered = {k.lower(): k for k in known}
    if name.lower() in lowered:
        return lowered[name.lower()]
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[close[0]] if close else None
