"""Any OpenAI-compatible chat endpoint over HTTP: `vllm serve`, llama.cpp's server, hosted APIs.

One client for every server-side engine: streaming is Server-Sent Events, the judge's P("yes")
comes from `logprobs`/`top_logprobs`, and images travel as `image_url` data parts when the
served model takes them (`accepts_images`; a text-only template fails on part lists, so text-only
models get plain strings).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from mmrag.generation.engines.base import (
    EngineInfo,
    Message,
    merge_logprob,
    stop_if_cancelled,
    text_only,
)
from mmrag.generation.errors import GenerationError, NoLogprobs

if TYPE_CHECKING:
    from mmrag.generation.citations import CitationFormat
    from mmrag.generation.types import Usage

MAX_TOP_LOGPROBS = 20  # the OpenAI API's limit, and vLLM's default max_logprobs


def api_root(base_url: str) -> str:
    """`http://host:port` and `http://host:port/v1` both mean the /v1 API root."""
    url = base_url.rstrip("/")
    return url + "/v1" if urlsplit(url).path in ("", "/") else url


class OpenAIEngine:
    """With `model` given, nothing is sent until the first request: a service can start before
    its `vllm serve` has loaded, answering with sources and a generation error meanwhile.
    Without it, the endpoint is asked for its first model at once."""

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str,
        api_key: str | None = None,
        accepts_images: bool = False,
        timeout: float = 60.0,
    ) -> None:
        self.root = api_root(base_url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(base_url=self.root, headers=headers, timeout=timeout)
        self.accepts_images = accepts_images
        self.model = model
        # Until the server refuses them once: constrained decoding, and token counts in streams.
        self.guided = self.stream_usage = True
        if model is None:  # ask the server, which also proves it answers
            served = self._served_models()
            if not served:
                raise GenerationError(f"the endpoint {self.root} lists no models; pass a model")
            model = self.model = served[0]
        self.info = EngineInfo(name="openai", model=model, accepts_images=accepts_images)

    def _fail(self, exc: Exception) -> GenerationError:
        return GenerationError(
            f"the openai engine cannot reach {self.root} ({type(exc).__name__}: {exc}); start "
            "`vllm serve MODEL` or `python -m llama_cpp.server --model GGUF` there, or pass "
            "another base_url"
        )

    def ping(self) -> bool:
        try:
            return self.client.get("/models", timeout=2.0).is_success
        except httpx.HTTPError:
            return False

    def _served_models(self) -> list[str]:
        try:
            response = self.client.get("/models")
        except httpx.HTTPError as exc:
            raise self._fail(exc) from None
        self._check(response)
        return [entry["id"] for entry in response.json().get("data", [])]

    def _check(self, response: httpx.Response) -> None:
        if response.is_success:
            return
        response.read()
        try:
            detail = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            detail = response.text
        detail = " ".join(str(detail).split())[:300]
        model = f" for model {self.model}" if self.model else ""
        raise GenerationError(
            f"the openai engine at {self.root} answered HTTP {response.status_code}{model}: "
            f"{detail}"
        )

    def _body(self, messages: list[Message], **options: Any) -> dict[str, Any]:
        sent = messages if self.accepts_images else text_only(messages)
        body = {"model": self.model, "messages": sent}
        body.update({k: v for k, v in options.items() if v is not None})
        return body

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self.client.post("/chat/completions", json=body)
        except httpx.HTTPError as exc:
            raise self._fail(exc) from None
        self._check(response)
        return response.json()

    def chat(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 96,
        temperature: float = 0.0,
        stop: list[str] | None = None,
    ) -> str:
        reply = self._post(
            self._body(messages, max_tokens=max_tokens, temperature=temperature, stop=stop)
        )
        return reply["choices"][0]["message"].get("content") or ""

    def stream(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 96,
        temperature: float = 0.0,
        stop: list[str] | None = None,
        constraint: CitationFormat | None = None,
        cancelled: Callable[[], bool] | None = None,
        usage: Usage | None = None,
    ) -> Iterator[str]:
        """With a `constraint`, the request also carries it the ways servers take it: a GBNF
        `grammar` (llama.cpp's server) and a `structured_outputs` regex with its older
        `guided_regex` spelling (vLLM); each ignores the others. It asks for the server's
        token counts too (`stream_options`: on the last chunk, or with vLLM's and SGLang's
        `continuous_usage_stats` on every chunk, since a caller that has its sentence closes
        the stream before the last). A server that refuses these fields (HTTP 400/422) but
        takes the request without them is asked plainly from then on.

        `usage` holds the server's counts where it sent them; until it does, the content
        chunks received count as completion tokens (one token each on vLLM and llama.cpp's
        servers) and the prompt as none.

        `cancelled` is asked before the request and at every line the server sends; when it
        says stop, the connection closes, which is how a client tells vLLM or llama.cpp's
        server to drop the request. A server reading a long prompt sends nothing, so there the
        client stops only at the server's first line."""
        stop_if_cancelled(cancelled)
        body = self._body(
            messages, stream=True, max_tokens=max_tokens, temperature=temperature, stop=stop
        )
        extras: dict[str, Any] = {}
        if constraint is not None and self.guided:
            regex = constraint.regex()
            extras["grammar"] = constraint.gbnf()
            extras["structured_outputs"] = {"regex": regex}
            extras["guided_regex"] = regex
        if self.stream_usage:
            extras["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        try:
            if extras:
                with self.client.stream("POST", "/chat/completions", json=body | extras) as sent:
                    if sent.status_code not in (400, 422):
                        self._check(sent)
                        yield from self._deltas(sent, cancelled, usage)
                        return
            with self.client.stream("POST", "/chat/completions", json=body) as response:
                self._check(response)
                if extras:  # refused with them, taken without: a strict server
                    self.guided = self.stream_usage = False
                yield from self._deltas(response, cancelled, usage)
        except httpx.HTTPError as exc:
            raise self._fail(exc) from None

    def _deltas(
        self,
        response: httpx.Response,
        cancelled: Callable[[], bool] | None,
        usage: Usage | None,
    ) -> Iterator[str]:
        counted = usage is not None  # until the server sends its own counts
        for line in response.iter_lines():
            stop_if_cancelled(cancelled)
            if not line.startswith("data:"):
                continue  # blank separators, ": keep-alive" comments, event names
            payload = line[len("data:") :].strip()
            if payload == "[DONE]":
                return
            try:
                event = json.loads(payload)
                choices = event.get("choices") or [{}]
                reported = event.get("usage")
            except (ValueError, AttributeError):
                raise GenerationError(
                    f"the openai engine at {self.root} sent a malformed event: {payload[:80]!r}"
                ) from None
            if usage is not None and isinstance(reported, dict):
                usage.prompt_tokens = int(reported.get("prompt_tokens") or 0)
                usage.completion_tokens = int(reported.get("completion_tokens") or 0)
                counted = False
            delta = (choices[0].get("delta") or {}).get("content")
            if delta:
                if counted and usage is not None:
                    usage.completion_tokens += 1
                yield delta

    def next_token_logprobs(self, messages: list[Message], *, top_k: int = 20) -> dict[str, float]:
        """Asks for one token with `top_logprobs` (capped at 20, as the OpenAI API caps it)."""
        reply = self._post(
            self._body(
                messages,
                max_tokens=1,
                temperature=0.0,
                logprobs=True,
                top_logprobs=min(top_k, MAX_TOP_LOGPROBS),
            )
        )
        content = (reply["choices"][0].get("logprobs") or {}).get("content") or []
        if not content:
            raise NoLogprobs(
                f"{self.root} returned no logprobs for model {self.model}; the server must "
                "support `logprobs` (vLLM and llama.cpp's server do)"
            )
        table: dict[str, float] = {}
        for entry in content[0].get("top_logprobs") or []:
            merge_logprob(table, entry["token"], float(entry["logprob"]))
        return table
