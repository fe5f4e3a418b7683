"""The LLM optimizer: prompt files in, one cleaned candidate out, through any LangChain chat model.

:class:`LLMOptimizer` builds the messages (prompting.py), calls the chat model with retries on
transient failures (HTTP 429 and 5xx, timeouts, dropped connections), cleans the answer
(cleaning.py) and returns a :class:`~kernelloop.optimizers.base.Proposal`. A failure the user
can fix becomes one line: an unknown model or a rejected key is a ConfigError, an endpoint
that keeps failing is :class:`LLMUnavailable`. The chat model is made by a factory on the first
request, so constructing the optimizer never touches the network.

:func:`make_nim_optimizer` wraps ChatNVIDIA (NVIDIA's hosted API or a local NIM);
:func:`make_openai_optimizer` wraps ChatOpenAI (any OpenAI-compatible server).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import ssl
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from pydantic import SecretStr

from ..config import OptimizeSettings
from ..errors import ConfigError, EnvironmentProblem, KernelloopError
from ..llm_config import KNOWN_NIM_CHAT_MODELS, LLMConfig, mask_key, suggest_model
from .base import InvalidResponse, Message, OptimizeRequest, Proposal, TokenUsage
from .cleaning import clean_response, extract_approach, to_ascii
from .prompting import build_messages

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage

MISSING_KEY_MESSAGE = "set NVIDIA_API_KEY (environment or ./.env) or pass --api-key; or use --optimizer offline"
LOCAL_PLACEHOLDER_KEY = "not-needed"  # OpenAI's client insists on a key; local servers ignore it


class LLMUnavailable(EnvironmentProblem):
    """The endpoint kept failing transiently (429, 5xx, timeouts) after every retry."""


# -- what went wrong -----------------------------------------------------------------------

FailureKind = Literal["transient", "model", "auth", "forbidden", "rejected", "malformed", "tls", "url", "unknown"]


@dataclass(frozen=True)
class EndpointFailure:
    kind: FailureKind
    status: int | None  # HTTP status when one is known
    label: str  # short: "HTTP 429", "timeout", "connection failed"
    detail: str  # one line from the server or the exception (not yet scrubbed of secrets)

    @property
    def transient(self) -> bool:
        return self.kind == "transient"


_TRANSIENT_STATUS = {408, 409, 425, 429}
# "[404] Not Found\n..." -- how ChatNVIDIA formats an HTTP error into a plain Exception
# (langchain_nvidia_ai_endpoints/_common.py, _format_error / _try_raise).
_NVIDIA_STATUS = re.compile(r"^\s*\[(\d{3})\]")
_UNKNOWN_MODEL = re.compile(
    r"model\b.{0,80}?\b(?:not found|does not exist|doesn't exist|not exist|unknown|is not supported|not supported"
    r"|not available|is invalid|invalid)|\b(?:unknown|invalid|unsupported|no such) model|model_not_found"
    r"|function\b.{0,80}?not found",
    re.IGNORECASE | re.DOTALL,
)


@lru_cache(maxsize=1)
def _exception_types() -> dict[str, tuple[type[BaseException], ...]]:
    """Exception classes of the HTTP stacks the chat models use, for whichever are installed."""
    transient: list[type[BaseException]] = [TimeoutError, ConnectionError]
    timeouts: list[type[BaseException]] = [TimeoutError]
    url: list[type[BaseException]] = []
    malformed: list[type[BaseException]] = [json.JSONDecodeError]
    tls: list[type[BaseException]] = [ssl.SSLError]
    try:  # ChatNVIDIA's sync client (requests)
        import requests

        transient += [requests.exceptions.Timeout, requests.exceptions.ConnectionError,
                      requests.exceptions.ChunkedEncodingError]
        timeouts += [requests.exceptions.Timeout]
        url += [requests.exceptions.InvalidURL, requests.exceptions.MissingSchema, requests.exceptions.InvalidSchema]
        tls += [requests.exceptions.SSLError]
    except ImportError:
        pass
    for module in ("httpx", "httpx2"):  # openai >= 3 is built on httpx2, older ones on httpx
        try:
            lib = importlib.import_module(module)
        except ImportError:
            continue
        transient += [lib.TransportError]
        timeouts += [lib.TimeoutException]
        url += [lib.UnsupportedProtocol, lib.InvalidURL]
    try:
        import openai

        transient += [openai.APIConnectionError]  # APITimeoutError is one
        timeouts += [openai.APITimeoutError]
        malformed += [openai.APIResponseValidationError]
    except ImportError:
        pass
    try:  # ChatNVIDIA's async client
        import aiohttp

        transient += [aiohttp.ClientConnectionError, aiohttp.ClientPayloadError]
        timeouts += [aiohttp.ServerTimeoutError]
    except ImportError:
        pass
    return {"transient": tuple(transient), "timeout": tuple(timeouts), "url": tuple(url),
            "malformed": tuple(malformed), "tls": tuple(tls)}


def _status_of(exc: BaseException) -> int | None:
    for obj in (exc, getattr(exc, "response", None)):
        for attr in ("status_code", "status"):
            value = getattr(obj, attr, None)
            if isinstance(value, int) and 100 <= value <= 599:
                return value
    m = _NVIDIA_STATUS.match(str(exc))
    return int(m.group(1)) if m else None


def _message_in(body: Any) -> str | None:
    """The human part of an error body: OpenAI's error.message, NVIDIA's detail/title, ..."""
    if isinstance(body, str):
        text = body.strip()
        if text.startswith("{"):
            try:
                body = ast.literal_eval(text)  # ChatNVIDIA puts dicts into its message with str()
            except (ValueError, SyntaxError):
                try:
                    body = json.loads(text)
                except ValueError:
                    return None  # a repr of objects (ChatNVIDIA dumps the response's __dict__): no message
        else:
            return text or None
    if not isinstance(body, dict):
        return None
    err = body.get("error")
    for candidate in ((err.get("message") if isinstance(err, dict) else err), body.get("message"),
                      body.get("detail"), body.get("title")):
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()
    return None


def _detail_of(exc: BaseException) -> str:
    """The server's own words when there are any, else the exception's first line."""
    found = _message_in(getattr(exc, "body", None))
    if found:
        return found
    text = str(exc).strip()
    m = _NVIDIA_STATUS.match(text)
    if m:
        # "[404] Not Found\nFunction 'x': Not found for account 'y'" (title line, then detail lines)
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        title = _message_in(lines[0][m.end():]) or ""
        rest = _message_in(" ".join(lines[1:])) or ""
        parts = [p for p in (title, rest) if p and p != "Unknown Error"]
        return ": ".join(dict.fromkeys(parts)) or lines[0]
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen and len(seen) < 8:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def classify_failure(exc: BaseException) -> EndpointFailure:
    """What a chat model's exception means: transient (retry), the user's to fix, or unknown."""
    types = _exception_types()
    detail = _detail_of(exc)
    status = _status_of(exc)
    if status is not None:
        label = f"HTTP {status}"
        if status in _TRANSIENT_STATUS or (status >= 500 and status not in (501, 505)):
            return EndpointFailure("transient", status, label, detail)
        if status == 401:
            return EndpointFailure("auth", status, label, detail)
        if status == 403:
            return EndpointFailure("forbidden", status, label, detail)
        if status == 404 or (status in (400, 422) and _UNKNOWN_MODEL.search(detail)):
            return EndpointFailure("model", status, label, detail)
        if 400 <= status < 500:
            return EndpointFailure("rejected", status, label, detail)
    chain = _chain(exc)
    if any(isinstance(e, types["tls"]) for e in chain):
        return EndpointFailure("tls", None, "TLS error", detail)
    if isinstance(exc, types["url"]):
        return EndpointFailure("url", None, "bad URL", detail)
    if isinstance(exc, types["timeout"]):
        return EndpointFailure("transient", None, "timeout", detail)
    if isinstance(exc, types["transient"]) or getattr(exc, "is_retryable", False) is True:
        return EndpointFailure("transient", None, "connection failed", detail)
    if isinstance(exc, types["malformed"]):
        return EndpointFailure("malformed", None, "malformed answer", detail)
    if type(exc) is Exception:  # ChatNVIDIA reports service errors as a bare Exception
        return EndpointFailure("rejected", None, "error", detail)
    return EndpointFailure("unknown", None, type(exc).__name__, detail)


# -- the optimizer -------------------------------------------------------------------------


class LLMOptimizer:
    """An optimizer that asks a chat model for each candidate.

    `chat_model_factory` is called once, at the first :meth:`propose`, so that constructing
    the optimizer never opens a connection. `endpoint` (a base URL) and `api_key` only shape
    error messages: the host is named, the key only ever appears masked. `sleep` is the wait
    between retries (tests pass a recorder)."""

    def __init__(
        self,
        chat_model_factory: Callable[[], BaseChatModel],
        *,
        name: str,
        model: str,
        settings: OptimizeSettings,
        prompts_dir: Path | None = None,
        endpoint: str = "",
        api_key: SecretStr | None = None,
        known_models: Sequence[str] = (),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.name = name
        self.model = model
        self.settings = settings
        self.prompts_dir = prompts_dir
        self.endpoint = endpoint
        self._factory = chat_model_factory
        self._api_key = api_key
        self._known_models = tuple(known_models)
        self._sleep = sleep
        self._chat: BaseChatModel | None = None
        self._setup_notes: list[str] = []  # warnings from making the chat model, reported once

    # The Optimizer protocol -------------------------------------------------------------

    def propose(self, request: OptimizeRequest) -> Proposal:
        started = time.monotonic()
        prompt = build_messages(request, self.prompts_dir)
        answer, retried = self._invoke_with_retries(prompt)
        thinking_s = time.monotonic() - started
        text = str(answer.text)
        tokens = token_usage(answer)
        try:
            source, notes = clean_response(text, request)
        except InvalidResponse as exc:
            reason = str(exc)
            if _finish_reason(answer) == "length":
                reason += f" (the answer stopped at the output limit, optimize.max_tokens={self.settings.max_tokens})"
            raise InvalidResponse(reason, response=text, prompt=prompt, tokens=tokens,
                                  thinking_s=thinking_s) from None
        if retried:
            notes.insert(0, f"retried the request {len(retried)} time(s) after: {', '.join(retried)}")
        notes = self._take_setup_notes() + notes
        approach = extract_approach(text) or f"{self.name} candidate, round {request.iteration}"
        return Proposal(
            source=source, approach=approach, optimizer=self.name, prompt=prompt, response=text, tokens=tokens,
            model=str(answer.response_metadata.get("model_name") or self.model), thinking_s=thinking_s, notes=notes,
        )

    # Calling the model ------------------------------------------------------------------

    def _invoke_with_retries(self, prompt: list[Message]) -> tuple[Any, list[str]]:
        from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

        s = self.settings
        retried: list[str] = []
        messages = to_langchain(prompt)

        def is_transient(exc: BaseException) -> bool:
            return not isinstance(exc, KernelloopError) and classify_failure(exc).transient

        def note_retry(state: Any) -> None:
            exc = state.outcome.exception() if state.outcome else None
            retried.append(classify_failure(exc).label if exc else "unknown")

        retrying = Retrying(
            stop=stop_after_attempt(s.llm_retries + 1),
            # first wait llm_backoff_s, doubling, plus up to llm_backoff_s of jitter, capped
            wait=wait_exponential_jitter(multiplier=s.llm_backoff_s, max=s.llm_backoff_max_s, jitter=s.llm_backoff_s),
            retry=retry_if_exception(is_transient),
            before_sleep=note_retry,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            return retrying(self._call_once, messages), retried
        except KernelloopError:
            raise
        except Exception as exc:
            failure = classify_failure(exc)
            if failure.kind == "unknown":
                raise
            raise self._user_error(failure, attempts=len(retried) + 1) from exc

    def _call_once(self, messages: list[BaseMessage]) -> Any:
        with warnings.catch_warnings(record=True) as caught:
            # The libraries warn on stderr (unknown model, <think> tags); the core never prints.
            warnings.simplefilter("always")
            if self._chat is None:
                try:
                    self._chat = self._factory()
                except ValueError as exc:  # the client refused its settings (pydantic validation, a bad URL)
                    errors = exc.errors() if callable(getattr(exc, "errors", None)) else []
                    why = errors[0].get("msg", "") if errors else str(exc)
                    raise ConfigError(f"cannot set up the {self.name} client for {self.endpoint or 'its endpoint'}: "
                                      f"{self._scrub(why)}") from exc
                self._setup_notes = [self._scrub(f"{self.name} client: {w.message}") for w in caught
                                     if issubclass(w.category, UserWarning)]
            return self._chat.invoke(messages)

    def _take_setup_notes(self) -> list[str]:
        notes, self._setup_notes = self._setup_notes, []
        return notes

    # Messages -------------------------------------------------------------------------

    def _where(self) -> str:
        host = urlparse(self.endpoint).netloc if self.endpoint else ""
        return f"the LLM endpoint {host}" if host else "the LLM endpoint"

    def _masked_key(self) -> str:
        return mask_key(self._api_key.get_secret_value()) if self._api_key else "(none)"

    def _scrub(self, text: str, limit: int = 200) -> str:
        """One ASCII line with no secret in it: the key masked, bearer tokens and key-like words hidden."""
        line = " ".join(str(text).split())
        if self._api_key and self._api_key.get_secret_value():
            line = line.replace(self._api_key.get_secret_value(), self._masked_key())
        line = re.sub(r"(?i)\bbearer\s+\S+", "Bearer ***", line)
        line = re.sub(r"\b(nvapi-|sk-)[A-Za-z0-9_\-]{8,}", r"\1***", line)
        line = to_ascii(line)
        return line if len(line) <= limit else line[: limit - 3].rstrip() + "..."

    def _user_error(self, failure: EndpointFailure, *, attempts: int) -> KernelloopError:
        where, detail = self._where(), self._scrub(failure.detail)
        status = f" ({failure.label})" if failure.status else ""
        if failure.kind == "transient":
            what = (f"timed out after {self.settings.llm_timeout_s:g} s" if failure.label == "timeout"
                    else f"{failure.label}: {detail}")
            return LLMUnavailable(f"{where} failed {attempts} time(s) in a row (last: {what}); try again later, "
                                  "or raise optimize.llm_retries / optimize.llm_timeout_s")
        if failure.kind == "model":
            suggestion = suggest_model(self.model, self._known_models) if self._known_models else None
            hint = f"; did you mean '{suggestion}'?" if suggestion and suggestion != self.model else ""
            url_hint = " and that --base-url is the API root (e.g. .../v1)" if failure.status == 404 else ""
            return ConfigError(f"{where} does not know the model '{self.model}'{status}: check the exact model name "
                               f"(--model or KERNELLOOP_MODEL){url_hint}{hint}")
        if failure.kind == "auth":
            return ConfigError(f"{where} rejected the API key {self._masked_key()}{status}: check NVIDIA_API_KEY "
                               "(environment or ./.env) or --api-key")
        if failure.kind == "forbidden":
            return ConfigError(f"{where} refused the API key {self._masked_key()} for the model '{self.model}'{status}: "
                               "the key has no access to it; check the key and the exact model name")
        if failure.kind == "malformed":
            return ConfigError(f"{where} did not answer like an OpenAI-compatible chat API ({detail}): check --base-url")
        if failure.kind == "tls":
            return EnvironmentProblem(f"TLS error talking to {where}: {detail}")
        if failure.kind == "url":
            return ConfigError(f"the LLM base URL {self.endpoint or '(unset)'} is not usable: {detail}")
        return ConfigError(f"{where} rejected the request{status}: {detail}")


# -- LangChain glue ------------------------------------------------------------------------


def to_langchain(messages: list[Message]) -> list[BaseMessage]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    return [kinds[m.role](content=m.content) for m in messages]


def token_usage(answer: Any) -> TokenUsage:
    """Token counts of an AIMessage: usage_metadata, else response_metadata's token_usage; 0 if absent."""
    usage = getattr(answer, "usage_metadata", None) or {}
    if usage:
        prompt, completion = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
        total = int(usage.get("total_tokens") or 0) or prompt + completion
        return TokenUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total)
    meta = getattr(answer, "response_metadata", None) or {}
    raw = meta.get("token_usage") or meta.get("usage") or {}
    if not isinstance(raw, dict):
        return TokenUsage()
    prompt, completion = int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0)
    return TokenUsage(prompt_tokens=prompt, completion_tokens=completion,
                      total_tokens=int(raw.get("total_tokens") or 0) or prompt + completion)


def _finish_reason(answer: Any) -> str | None:
    meta = getattr(answer, "response_metadata", None) or {}
    return meta.get("finish_reason")


# -- factories -----------------------------------------------------------------------------


def _require(module: str, optimizer: str, install: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise EnvironmentProblem(f"the {optimizer} optimizer needs the Python package {module.replace('_', '-')}: "
                                 f"pip install {install}, or use --optimizer offline")


def make_nim_optimizer(config: LLMConfig, settings: OptimizeSettings, *,
                       prompts_dir: Path | None = None) -> LLMOptimizer:
    """An optimizer on ChatNVIDIA: NVIDIA's hosted API (needs a key) or a local NIM at config.base_url.

    ChatNVIDIA is made at the first request. Even then it lists the service's models only when
    the base URL is NVIDIA's hosted API and the model is missing from the package's own table;
    its usage telemetry is switched off."""
    if config.nvidia_hosted and config.api_key is None:
        raise ConfigError(MISSING_KEY_MESSAGE)
    for module in ("langchain_nvidia_ai_endpoints", "tenacity"):
        _require(module, "nim", "-e . (kernelloop's own dependencies)")
    key = config.api_key

    def chat_nvidia() -> BaseChatModel:
        from langchain_nvidia_ai_endpoints import ChatNVIDIA

        kwargs: dict[str, Any] = {
            "model": config.model,
            "base_url": config.base_url,
            "temperature": settings.temperature,
            "max_completion_tokens": settings.max_tokens,
            "timeout": settings.llm_timeout_s,  # requests' connect/read timeout per call
            "usage_telemetry_enabled": False,  # no background posts to NVIDIA's telemetry service
        }
        if key is not None:
            kwargs["api_key"] = key.get_secret_value()
        return ChatNVIDIA(**kwargs)

    return LLMOptimizer(chat_nvidia, name="nim", model=config.model, settings=settings, prompts_dir=prompts_dir,
                        endpoint=config.base_url, api_key=key,
                        known_models=KNOWN_NIM_CHAT_MODELS if config.nvidia_hosted else ())


def make_openai_optimizer(config: LLMConfig, settings: OptimizeSettings, *,
                          prompts_dir: Path | None = None) -> LLMOptimizer:
    """An optimizer on ChatOpenAI: any OpenAI-compatible server at config.base_url.

    A local server needs no key (a placeholder is sent); NVIDIA's hosted API does. The
    client's own retries are off (max_retries=0): LLMOptimizer retries with backoff itself."""
    if config.nvidia_hosted and config.api_key is None:
        raise ConfigError(MISSING_KEY_MESSAGE)
    for module in ("langchain_openai", "tenacity"):
        _require(module, "openai", "-e . (kernelloop's own dependencies)")
    key = config.api_key

    def chat_openai() -> BaseChatModel:
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            model=config.model,
            base_url=config.base_url,
            api_key=key if key is not None else SecretStr(LOCAL_PLACEHOLDER_KEY),
            timeout=settings.llm_timeout_s,
            max_retries=0,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            use_responses_api=False,  # plain /chat/completions, what compatible servers speak
        )

    return LLMOptimizer(chat_openai, name="openai", model=config.model, settings=settings, prompts_dir=prompts_dir,
                        endpoint=config.base_url, api_key=key,
                        known_models=KNOWN_NIM_CHAT_MODELS if config.nvidia_hosted else ())
