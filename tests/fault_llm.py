"""A fault-injecting OpenAI-compatible chat server on loopback, for tests of the LLM path.

``FaultServer`` answers ``POST /v1/chat/completions``. Each request takes the next fault from
its queue (a ``Fault``), or the default once the queue is empty; the default replies with
``reply(messages)`` as a normal completion. Every request is recorded (its JSON body), so a test
can count attempts and read what was sent. Faults:

- ``ok``: a normal completion (``text`` or the default reply)
- ``status``: an HTTP error ``code`` with an OpenAI-style error body, and ``retry_after`` seconds
- ``hang``: no answer for ``seconds`` (the client's timeout fires first), then the connection closes
- ``truncated_json``: HTTP 200 whose JSON body stops halfway
- ``empty_choices``: HTTP 200 with ``"choices": []``
- ``cut_body``: headers promise more bytes than are sent before the connection closes
- ``cut_stream``: a chunked ``text/event-stream`` reply that stops mid-way, without its last chunk
- ``endless``: a chunked HTTP 200 that never ends (64 KB pieces as fast as the client reads)
- ``trickle``: an HTTP 200 whose body comes one byte every ``seconds`` (its Content-Length promises 1 MB)
- ``echo_key``: HTTP ``code`` whose error message repeats the request's Authorization header
- ``error_body``: HTTP 200 whose body is an OpenAI-style error, no choices
- ``not_json``: HTTP 200 with an HTML page
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence


@dataclass(frozen=True)
class Fault:
    kind: str
    code: int = 500
    retry_after: float | None = None
    seconds: float = 0.0
    text: str | None = None
    message: str | None = None  # ``status``: the error body's message (default "injected HTTP <code>")


def completion(text: str) -> dict[str, Any]:
    return {"id": "chatcmpl-test", "object": "chat.completion", "model": "fault",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3}}


class FaultServer:
    """Serve on 127.0.0.1 (a free port) until ``close``; use as a context manager."""

    def __init__(self, reply: Callable[[list[dict[str, Any]]], str] | str = "Final Answer: ok",
                 faults: Sequence[Fault] = (), default: Fault = Fault("ok")) -> None:
        self.reply = reply if callable(reply) else (lambda messages, text=reply: text)
        self.faults = list(faults)
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._server.handle_error = lambda request, address: None  # type: ignore[method-assign]  # cut replies
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> "FaultServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def push(self, *faults: Fault) -> None:
        with self._lock:
            self.faults.extend(faults)

    def _next(self, body: dict[str, Any]) -> Fault:
        with self._lock:
            self.requests.append(body)
            return self.faults.pop(0) if self.faults else self.default

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                fault = server._next(body)
                text = fault.text if fault.text is not None else server.reply(body.get("messages", []))
                payload = json.dumps(completion(text)).encode()
                if fault.kind == "ok":
                    self._send(200, payload)
                elif fault.kind == "status":
                    said = fault.message or f"injected HTTP {fault.code}"
                    error = json.dumps({"error": {"message": said}}).encode()
                    headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
                    self._send(fault.code, error, headers)
                elif fault.kind == "hang":
                    server._stop.wait(fault.seconds)
                    self._drop()
                elif fault.kind == "truncated_json":
                    self._send(200, payload[: len(payload) // 2])
                elif fault.kind == "empty_choices":
                    self._send(200, json.dumps({"id": "x", "choices": []}).encode())
                elif fault.kind == "cut_body":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload[: len(payload) // 3])
                    self.wfile.flush()
                    self._drop()
                elif fault.kind == "cut_stream":
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    chunk = b'data: {"choices": [{"delta": {"content": "Final Ans'
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                    self._drop()
                elif fault.kind in ("endless", "trickle"):
                    self._stream_forever(fault)
                elif fault.kind == "echo_key":
                    said = f"invalid key: {self.headers.get('Authorization')}"
                    self._send(fault.code, json.dumps({"error": {"message": said}}).encode())
                elif fault.kind == "error_body":
                    self._send(200, json.dumps({"error": {"message": "the model is overloaded"}}).encode())
                elif fault.kind == "not_json":
                    self._send(200, b"<html><body>502 Bad Gateway</body></html>")
                else:
                    raise ValueError(f"unknown fault {fault.kind!r}")

            def _stream_forever(self, fault: Fault) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if fault.kind == "endless":
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(2**20))
                self.end_headers()
                piece = b'{"choices": [' if fault.kind == "trickle" else b"x" * 65536
                try:
                    while not server._stop.is_set():
                        if fault.kind == "endless":
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        else:
                            self.wfile.write(piece[:1])
                            self.wfile.flush()
                            piece = piece[1:] or b" "
                            server._stop.wait(fault.seconds)
                except OSError:  # the client gave up
                    pass
                self._drop()

            def _send(self, code: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def _drop(self) -> None:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        return Handler
