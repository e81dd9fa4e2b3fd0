"""A real local HTTP server replaying scripted LLM answers, to test LLM clients with no model endpoint.

Speaks enough of two APIs for the official `openai` and `anthropic` SDKs to work against it unchanged, streaming
included (HTTP/1.1 keep-alive, chunked SSE): OpenAI ``POST /v1/chat/completions`` and ``GET /v1/models``, Anthropic
``POST /v1/messages`` (each also without the ``/v1``). Standard library only, so a benchmark can run it anywhere::

    rules = [Rule(r"relu", [Reply(status=429, retry_after_ms=10), Reply("def relu(x): ...")]),
             Rule(r".", [Reply("generic answer")], system=r"expert")]
    with ScriptedLLMServer(rules, default=None) as server:     # url: "http://127.0.0.1:PORT"
        openai.OpenAI(base_url=server.url + "/v1", api_key="x"); anthropic.Anthropic(base_url=server.url, api_key="x")

* The first rule (in order) whose ``match`` regex (re.S) is found in the last user message's text, and whose
  ``system`` regex (if set) in the system prompt, answers. It hands out its replies in order; the last repeats.
* No rule matches and no ``default``: a 400 error (provider-shaped) quoting the prompt's first 200 chars.
* ``server.requests`` records every request: ``{"path", "api", "body", "headers", "matched", "time"}``.
* ``Reply.finish``: the finish reason sent (default ``stop`` / ``end_turn``); ``length`` (an answer cut by the output
  limit) is sent to Anthropic clients as ``max_tokens``, that API's word for it. The text is sent whole either way.
* ``Reply.cut_after``: a stream is dropped after that many characters of text, inside the chunked body and before
  any finish/stop event, so the client's HTTP layer sees an incomplete body, as with a real dropped connection.
  A non-streaming reply with ``cut_after`` set sends half its JSON body (Content-Length promises all), then drops.

Command line: ``python tests/llm_server.py SCRIPT.json [--host H] [--port N]`` serves a JSON script
``{"rules": [{"match": ..., "system": ..., "replies": [{Reply fields}]}], "default": {Reply fields}}`` until killed,
printing its URL as the first line of stdout.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODEL = "scripted-model"  # the model GET /v1/models lists (besides those requests named); answers echo the request's
ROUTES = {"/v1/chat/completions": "openai", "/chat/completions": "openai",
          "/v1/messages": "anthropic", "/messages": "anthropic"}
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
               429: "rate_limit_error", 529: "overloaded_error"}  # anything else: "api_error"


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A client dropping its keep-alive connection (at close, or after a cut-off stream) is normal.
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


@dataclass
class Reply:
    text: str = ""                      # the assistant's answer (for an error status: the error message, if set)
    status: int = 200                   # 429 / 500 / 503 ...: an error response, JSON body in the provider's shape
    retry_after_ms: int | None = None   # on errors: `retry-after-ms` header, and `retry-after` in (fractional) seconds
    delay_s: float = 0.0                # sleep before answering (a slow answer)
    cut_after: int | None = None        # drop the connection after this many characters of text (see module doc)
    input_tokens: int | None = None     # usage figures; default: prompt chars / 4 and text chars / 4
    output_tokens: int | None = None
    finish: str | None = None           # the finish reason; default stop (OpenAI) / end_turn (Anthropic)


@dataclass
class Rule:
    match: str                  # regex searched (re.S) in the last user message's text
    replies: list[Reply]        # consumed in order, one per matching request; the last one repeats
    system: str | None = None   # optional regex that must also match the system prompt

    def __post_init__(self):  # fail here, not as a dropped connection inside a handler thread
        re.compile(self.match), re.compile(self.system or "")
        if not self.replies:
            raise ValueError(f"Rule({self.match!r}) needs at least one reply")


def _text(content) -> str:
    """A message's text: a string, or a list of content parts whose text parts are joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and "text" in p)
    return ""


def _prompt(api: str, body: dict) -> tuple[str, str, int]:
    """(last user message text, system prompt text, total prompt chars) of a request body."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if api == "anthropic":
        system = _text(body.get("system") or "")
    else:
        system = "\n".join(_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
    users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
    total = sum(len(_text(m.get("content"))) for m in messages) + (len(system) if api == "anthropic" else 0)
    return (users[-1] if users else ""), system, total


def _pieces(text: str) -> list[str]:
    """Split an answer into stream deltas: at least 4 for a short text, 16 characters each for a long one."""
    size = max(1, min(16, -(-len(text) // 4)))
    return [text[i:i + size] for i in range(0, len(text), size)]


def _shut(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed by the other side
        pass


def _error_body(api: str, status: int, message: str) -> dict:
    kind = ERROR_TYPES.get(status, "api_error")
    if api == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, as real endpoints (and the SDKs' pools) use

    def log_message(self, *args):  # keep test output clean
        return

    def setup(self):
        super().setup()
        self.server.owner._track(self.connection, True)

    def finish(self):
        self.server.owner._track(self.connection, False)
        super().finish()

    def _send_json(self, status: int, obj: dict, headers: dict | None = None, cut: bool = False):
        data = json.dumps(obj).encode()
        self.send_response(status)
        for key, value in {"content-type": "application/json", **(headers or {})}.items():
            self.send_header(key, value)
        self.send_header("content-length", str(len(data)))  # promises the whole body, even when cut
        self.end_headers()
        self.wfile.write(data[: len(data) // 2] if cut else data)
        if cut:
            self._abort()

    def _send_sse(self, frames: list[str], cut: bool):
        self.send_response(200)
        for key, value in (("content-type", "text/event-stream"), ("cache-control", "no-cache"),
                           ("transfer-encoding", "chunked")):
            self.send_header(key, value)
        self.end_headers()
        for frame in frames:  # one HTTP chunk per SSE event, so the client sees them arrive one by one
            data = frame.encode()
            self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        if cut:
            self._abort()  # no terminating zero-length chunk: the client sees an incomplete body
        else:
            self.wfile.write(b"0\r\n\r\n")

    def _abort(self):
        self.close_connection = True
        _shut(self.connection)

    def do_GET(self):
        if self.path.split("?")[0].rstrip("/") in ("/v1/models", "/models"):
            models = self.server.owner._models()
            self._send_json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in models]})
        else:
            self._send_json(404, _error_body("openai", 404, f"no such path: {self.path}"))

    def do_POST(self):
        try:
            self._post()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout, cancelled stream)
            self.close_connection = True

    def _post(self):
        owner = self.server.owner
        path = self.path.split("?")[0].rstrip("/")
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        api = ROUTES.get(path)
        if api is None:
            return self._send_json(404, _error_body("openai", 404, f"no such path: {self.path}"))
        try:
            body = json.loads(raw)
        except ValueError:
            return self._send_json(400, _error_body(api, 400, "request body is not JSON"))
        headers = {k.lower(): v for k, v in self.headers.items()}
        reply, user, prompt_chars = owner._route(path, api, body, headers)
        if reply is None:
            return self._send_json(400, _error_body(api, 400, f"no scripted rule matches prompt: {user[:200]!r}"))
        if reply.delay_s:
            owner._stopping.wait(reply.delay_s)  # a stop() wakes slow answers up
        if reply.status >= 400:
            extra = {}
            if reply.retry_after_ms is not None:
                extra = {"retry-after-ms": str(reply.retry_after_ms), "retry-after": f"{reply.retry_after_ms / 1000:g}"}
            message = reply.text or f"scripted error {reply.status}"
            return self._send_json(reply.status, _error_body(api, reply.status, message), extra)

        cut = reply.cut_after is not None
        text = reply.text[: reply.cut_after] if cut and body.get("stream") else reply.text
        usage_in = reply.input_tokens if reply.input_tokens is not None else max(1, prompt_chars // 4)
        usage_out = reply.output_tokens if reply.output_tokens is not None else max(1, len(reply.text) // 4)
        model = body.get("model") or MODEL
        if api == "openai":
            self._openai(body, model, text, usage_in, usage_out, cut, reply.finish or "stop")
        else:
            finish = {None: "end_turn", "length": "max_tokens"}.get(reply.finish, reply.finish)
            self._anthropic(body, model, text, usage_in, usage_out, cut, finish)

    def _openai(self, body, model, text, usage_in, usage_out, cut, finish):
        cid, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
        usage = {"prompt_tokens": usage_in, "completion_tokens": usage_out, "total_tokens": usage_in + usage_out}
        head = {"id": cid, "created": created, "model": model}
        if not body.get("stream"):
            message = {"role": "assistant", "content": text}
            return self._send_json(200, {**head, "object": "chat.completion", "usage": usage, "choices": [
                {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}]}, cut=cut)

        def chunk(delta, finish=None):
            return {**head, "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

        events = [chunk({"role": "assistant", "content": ""})] + [chunk({"content": p}) for p in _pieces(text)]
        if not cut:
            events.append(chunk({}, finish))
            if (body.get("stream_options") or {}).get("include_usage"):
                events.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        frames = [f"data: {json.dumps(e)}\n\n" for e in events] + ([] if cut else ["data: [DONE]\n\n"])
        self._send_sse(frames, cut)

    def _anthropic(self, body, model, text, usage_in, usage_out, cut, finish):
        message = {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant", "model": model,
                   "content": [{"type": "text", "text": text}], "stop_reason": finish, "stop_sequence": None,
                   "usage": {"input_tokens": usage_in, "output_tokens": usage_out}}
        if not body.get("stream"):
            return self._send_json(200, message, cut=cut)
        start = {**message, "content": [], "stop_reason": None,
                 "usage": {"input_tokens": usage_in, "output_tokens": 1}}  # as the real API: output counted at the end
        events = [("message_start", {"message": start}), ("ping", {}),
                  ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})]
        events += [("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": p}})
                   for p in _pieces(text)]
        if not cut:
            events += [("content_block_stop", {"index": 0}),
                       ("message_delta", {"delta": {"stop_reason": finish, "stop_sequence": None},
                                          "usage": {"output_tokens": usage_out}}),
                       ("message_stop", {})]
        self._send_sse([f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n" for name, data in events], cut)


class ScriptedLLMServer:
    """Serves `rules` on host:port (port 0: a free one) from a background thread; see the module docstring."""

    def __init__(self, rules: list[Rule], host: str = "127.0.0.1", port: int = 0, default: Reply | None = None):
        self.rules, self.default, self.host, self.port = list(rules), default, host, port
        self.url: str | None = None  # set by start()
        self.requests: list[dict] = []
        self._counts = [0] * len(self.rules)  # replies consumed per rule
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._conns: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def from_json(cls, path: str | Path, **kwargs) -> "ScriptedLLMServer":
        """Rules from a JSON script (format in the module docstring); kwargs go to __init__ (host, port)."""
        data = json.loads(Path(path).read_text())
        rules = [Rule(r["match"], [Reply(**x) for x in r["replies"]], r.get("system")) for r in data.get("rules", [])]
        default = Reply(**data["default"]) if data.get("default") else None
        return cls(rules, default=default, **kwargs)

    def add(self, rule: Rule) -> None:
        with self._lock:
            self.rules.append(rule)
            self._counts.append(0)

    def start(self) -> "ScriptedLLMServer":
        self._stopping.clear()
        self._httpd = _Server((self.host, self.port), _Handler)  # bound here, so a restart works
        self._httpd.daemon_threads = True  # a client holding a keep-alive connection must not block stop()
        self._httpd.owner = self  # how handler threads reach the rules
        self.url = f"http://{self.host}:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="scripted-llm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        with self._lock:  # drop idle keep-alive connections, so their handler threads end now
            conns = list(self._conns)
        for conn in conns:
            _shut(conn)
        self._httpd.server_close()
        self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> "ScriptedLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def _models(self) -> list[str]:
        with self._lock:
            seen = {r["body"].get("model") for r in self.requests if isinstance(r["body"].get("model"), str)}
        return [MODEL] + sorted(seen - {MODEL})

    def _route(self, path: str, api: str, body: dict, headers: dict) -> tuple[Reply | None, str, int]:
        """Pick (and consume) the reply for a request and record it: (reply or None, user text, prompt chars)."""
        user, system, prompt_chars = _prompt(api, body)
        with self._lock:
            matched = next((i for i, r in enumerate(self.rules) if re.search(r.match, user, re.S)
                            and (r.system is None or re.search(r.system, system, re.S))), None)
            if matched is None:
                reply = self.default
            else:
                replies = self.rules[matched].replies
                reply = replies[min(self._counts[matched], len(replies) - 1)]
                self._counts[matched] += 1
            self.requests.append({"path": path, "api": api, "body": body, "headers": headers,
                                  "matched": matched, "time": time.monotonic()})
        return reply, user, prompt_chars


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve scripted LLM answers (OpenAI and Anthropic APIs).")
    parser.add_argument("script", help='JSON file: {"rules": [...], "default": {...}}')
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server = ScriptedLLMServer.from_json(args.script, host=args.host, port=args.port).start()
    print(server.url, flush=True)  # first line of stdout: what a parent process reads to find us
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
