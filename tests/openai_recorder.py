"""A real OpenAI-compatible HTTP server on loopback that records every request it is sent.

Why not a real VLM server: no vision-language weights can be had on these machines (nothing on
PyPI, Debian or npm carries them, and no model hub is reachable; see
../shared/specs/environment.md), and llama.cpp's server takes images only with a VLM GGUF and
its projector. What these tests must prove is the wire format mmrag sends a VLM server (vLLM,
llama.cpp's server): this server speaks the same protocol over real HTTP (`/v1/models`,
`/v1/chat/completions` with and without streaming and `logprobs`), records each request body as
received, and answers from a script, so the bytes of every image part can be checked.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], str]


class Recorder:
    def __init__(
        self,
        reply: Reply,
        model: str,
        refuse: frozenset[str] = frozenset(),
        logprobs: bool = True,
    ) -> None:
        self.reply = reply
        self.model = model
        self.refuse = refuse  # request fields answered with HTTP 400, as a strict server does
        self.logprobs = logprobs  # False: as a server that ignores `logprobs`
        self.requests: list[tuple[str, dict[str, Any]]] = []  # (path, JSON body)
        self.lock = threading.Lock()
        self.url = ""

    def chat_requests(self) -> list[dict[str, Any]]:
        with self.lock:
            return [body for path, body in self.requests if path.endswith("/chat/completions")]


def image_urls(body: dict[str, Any]) -> list[str]:
    """The `image_url` URLs of a chat request, in order."""
    return [
        part["image_url"]["url"]
        for message in body["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


PROMPT_TOKENS = 100  # what the recording server says any prompt took


def usage(completion_tokens: int) -> dict[str, int]:
    total = PROMPT_TOKENS + completion_tokens
    return {
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": completion_tokens,
        "total_tokens": total,
    }


def _handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:  # keep pytest's output clean
            pass

        def _json(self, value: Any) -> None:
            data = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            with recorder.lock:
                recorder.requests.append((self.path, {}))
            self._json({"object": "list", "data": [{"id": recorder.model, "object": "model"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with recorder.lock:
                recorder.requests.append((self.path, body))
            if refused := sorted(recorder.refuse & set(body)):
                data = json.dumps({"error": {"message": f"unknown fields: {refused}"}}).encode()
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            text = recorder.reply(body)
            if body.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                # Token counts as vLLM reports them: a word is a token, the prompt 100; with
                # `include_usage` a last chunk carries them, and with `continuous_usage_stats`
                # every chunk carries the counts so far.
                options = body.get("stream_options") or {}
                words = text.split(" ")
                for count, word in enumerate(words, 1):
                    chunk: dict[str, Any] = {"choices": [{"delta": {"content": word + " "}}]}
                    if options.get("include_usage") and options.get("continuous_usage_stats"):
                        chunk["usage"] = usage(count)
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                if options.get("include_usage"):
                    chunk = {"choices": [], "usage": usage(len(words))}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                return
            choice: dict[str, Any] = {"message": {"role": "assistant", "content": text}}
            if body.get("logprobs") and recorder.logprobs:
                # The scripted reply's first word leads: P("yes") = 0.82 for a "yes" (or any
                # other reply), 0.18 for a "no".
                first, second = ("no", "yes") if text.lower().startswith("no") else ("yes", "no")
                top = [{"token": first, "logprob": -0.2}, {"token": second, "logprob": -1.7}]
                choice["logprobs"] = {"content": [{"token": first, "top_logprobs": top}]}
            self._json({"choices": [choice]})

    return Handler


@contextmanager
def recording_server(
    reply: Reply = lambda _body: "The door is red [1].",
    model: str = "Qwen/Qwen2.5-VL-7B-Instruct",
    refuse: set[str] | frozenset[str] = frozenset(),
    logprobs: bool = True,
) -> Iterator[Recorder]:
    """Serves on a free loopback port until the block ends; `Recorder.url` is its /v1 root.
    Requests carrying any field in `refuse` get HTTP 400; with `logprobs=False` no reply
    carries token probabilities."""
    recorder = Recorder(reply, model, frozenset(refuse), logprobs)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(recorder))
    recorder.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield recorder
    finally:
        server.shutdown()
        server.server_close()
