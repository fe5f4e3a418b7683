"""A fake OpenAI-compatible HTTP server on 127.0.0.1, scriptable per request.

    with FakeOpenAIServer() as server:
        server.script(Reply(status=429, body={"error": {"message": "slow down"}}),
                      Reply(body=chat_completion("Approach: x\\n```cuda\\n...\\n```")))
        ... point a client at server.base_url ("http://127.0.0.1:<port>/v1") ...
        server.requests[0].headers["Authorization"], server.requests[0].json["model"]

It serves `POST /v1/chat/completions` (the next scripted Reply, else `default_reply`) and
`GET /v1/models` (the `models` list). Every request is recorded: method, path, headers and
the JSON body. A Reply can delay its answer (to make a client time out). The `fake_openai_server`
fixture yields a started server and stops it afterwards.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


def chat_completion(content: str, *, model: str = "fake-model", prompt_tokens: int = 11,
                    completion_tokens: int = 7, finish_reason: str = "stop",
                    reasoning_content: str | None = None) -> dict[str, Any]:
    """An OpenAI chat.completion body with one choice and a usage block."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning_content is not None:
        message["reasoning_content"] = reasoning_content
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] | list[Any] | str = field(default_factory=lambda: chat_completion("ok"))
    delay_s: float = 0.0  # wait before answering
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    json: Any  # the decoded body, or None for a GET / non-JSON body
    raw: bytes

    def header(self, name: str) -> str | None:
        """A header's value, whatever case the client wrote its name in (h11 lowercases them)."""
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


class FakeOpenAIServer:
    def __init__(self, *, models: list[str] | None = None, default_reply: Reply | None = None) -> None:
        self.models = list(models or ["fake-model"])
        self.default_reply = default_reply or Reply()
        self.requests: list[Recorded] = []
        self._script: list[Reply] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # control ------------------------------------------------------------------------------

    def script(self, *replies: Reply) -> FakeOpenAIServer:
        """Queue replies for the next chat requests, in order."""
        with self._lock:
            self._script.extend(replies)
        return self

    @property
    def pending(self) -> int:
        """Scripted replies not served yet."""
        with self._lock:
            return len(self._script)

    @property
    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.method == "POST" and r.path.endswith("/chat/completions")]

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                server._record(self, b"")
                if self.path.rstrip("/").endswith("/models"):
                    body = {"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": "fake"}
                                                       for m in server.models]}
                    self._send(Reply(body=body))
                else:
                    self._send(Reply(status=404, body={"error": {"message": f"no route {self.path}"}}))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                server._record(self, raw)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(Reply(status=404, body={"error": {"message": f"no route {self.path}"}}))
                    return
                self._send(server._next_reply())

            def _send(self, reply: Reply) -> None:
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                data = reply.body.encode() if isinstance(reply.body, str) else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    content_type = "text/plain" if isinstance(reply.body, str) else "application/json"
                    self.send_header("Content-Type", reply.headers.get("Content-Type", content_type))
                    for key, value in reply.headers.items():
                        if key.lower() != "content-type":
                            self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test); nothing to answer

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that hung up mid-answer is expected in timeout tests

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # internals ---------------------------------------------------------------------------

    def _next_reply(self) -> Reply:
        with self._lock:
            return self._script.pop(0) if self._script else self.default_reply

    def _record(self, handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = None
        with self._lock:
            self.requests.append(Recorded(method=handler.command, path=handler.path,
                                          headers={k: v for k, v in handler.headers.items()}, json=decoded, raw=raw))


@pytest.fixture
def fake_openai_server():
    """A started FakeOpenAIServer, stopped after the test."""
    with FakeOpenAIServer() as server:
        yield server
