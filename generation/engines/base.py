"""One interface over every way of running a language model, and the factory that picks one.

Engines speak OpenAI chat messages: `content` is a string, or a list of parts
(`{"type": "text", "text": ...}`, `{"type": "image_url", "image_url": {"url": "data:..."}}`).
That is the wire format of llama.cpp's server and `vllm serve`, so the HTTP client passes
messages through unchanged and in-process engines translate once. Backends are imported only
when chosen, so importing `generation` stays instant.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args

from mmrag.generation.errors import GenerationCancelled, GenerationError

if TYPE_CHECKING:
    from mmrag.generation.citations import CitationFormat
    from mmrag.generation.types import Usage

Message = dict[str, Any]

EngineName = Literal["llamacpp", "openai", "vllm", "transformers"]
ENGINES: tuple[EngineName, ...] = get_args(EngineName)


@dataclass(frozen=True)
class EngineInfo:
    name: str  # llamacpp | openai | vllm | transformers
    model: str  # path, hub name or served model id
    accepts_images: bool


class Engine(Protocol):
    info: EngineInfo

    def chat(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 96,
        temperature: float = 0.0,
        stop: list[str] | None = None,
    ) -> str: ...

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
        """Text deltas. `constraint` asks for decoding constrained to a cited sentence; engines
        that cannot constrain (or a server that refuses it) write from the prompt alone.
        `usage`, when given, holds the tokens read and written once the iterator is exhausted
        or closed, so a caller that stops it early (at its sentence's end) learns what that
        reply cost.

        `cancelled()` turning true means the caller no longer wants the reply: engines ask it
        while they work, not only between tokens (a long prompt yields none for seconds), and
        then stop, free for the next call, raising GenerationCancelled. Closing the iterator
        stops an engine only at its next token."""
        ...

    def next_token_logprobs(self, messages: list[Message], *, top_k: int = 20) -> dict[str, float]:
        """The first generated token's top-k alternatives as {token text: log-probability}."""
        ...

    def ping(self) -> bool:
        """Whether the engine can answer now (readiness probes ask this, cheaply)."""
        ...


class InProcess:
    """Engines whose model lives in this process: ready once constructed, and a whole reply
    is their token stream joined (subclasses give `stream`)."""

    def ping(self) -> bool:
        return True

    def chat(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 96,
        temperature: float = 0.0,
        stop: list[str] | None = None,
    ) -> str:
        return "".join(
            self.stream(messages, max_tokens=max_tokens, temperature=temperature, stop=stop)
        )


def text_only(messages: list[Message]) -> list[Message]:
    """Part lists joined into plain strings, image parts dropped.

    Text-only chat templates (and llama.cpp's server for such models) concatenate `content` as
    a string and fail on a list, so engines without image input send strings.
    """
    flat = []
    for message in messages:
        content = message["content"]
        if not isinstance(content, str):
            content = "".join(part["text"] for part in content if part.get("type") == "text")
        flat.append({**message, "content": content})
    return flat


def decode_data_url(url: str) -> bytes:
    """Image bytes from a `data:image/...;base64,` URL: in-process engines, and the service's
    chat route, fetch nothing. Whitespace in the base64 is skipped, as every decoder does:
    the `base64` tool wraps its output at 76 columns."""
    header, _, payload = url.partition(",")
    if not (header.startswith("data:") and header.endswith(";base64")):
        raise GenerationError(f"images come as base64 data URLs, not {url[:40]!r}")
    try:
        return base64.b64decode("".join(payload.split()), validate=True)
    except binascii.Error as exc:
        raise GenerationError(f"malformed base64 image data URL: {exc}") from None


def stop_if_cancelled(cancelled: Callable[[], bool] | None) -> None:
    """Where an engine can stop cheaply: raise if its caller no longer wants the reply."""
    if cancelled is not None and cancelled():
        raise GenerationCancelled("generation was cancelled by its caller")


def merge_logprob(table: dict[str, float], token: str, logprob: float) -> None:
    """Distinct token ids can decode to the same text; their probabilities add up."""
    if token in table:
        high, low = max(table[token], logprob), min(table[token], logprob)
        table[token] = high + math.log1p(math.exp(low - high))
    else:
        table[token] = logprob


class StopCutter:
    """Applies stop strings to a stream of deltas for backends without native stop support.

    Text that could be the start of a stop string is held back until it is known not to be.
    """

    def __init__(self, stop: list[str] | None) -> None:
        self.stop = [s for s in (stop or []) if s]
        self.pending = ""
        self.stopped = False

    def feed(self, delta: str) -> str:
        if self.stopped:
            return ""
        self.pending += delta
        hits = [i for i in (self.pending.find(s) for s in self.stop) if i >= 0]
        if hits:
            self.stopped = True
            out, self.pending = self.pending[: min(hits)], ""
            return out
        hold = max(
            (k for s in self.stop for k in range(1, len(s)) if self.pending.endswith(s[:k])),
            default=0,
        )
        cut = len(self.pending) - hold
        out, self.pending = self.pending[:cut], self.pending[cut:]
        return out

    def flush(self) -> str:
        out, self.pending = ("" if self.stopped else self.pending), ""
        return out


def load_engine(
    kind: str = "llamacpp",
    model: str | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    device: str | None = None,
    n_ctx: int = 4096,
    timeout: float = 60.0,
    accepts_images: bool | None = None,
    n_threads: int | None = None,
) -> Engine:
    """Build an engine by name; the model loads once here and is shared by the process.

    `openai` is any OpenAI-compatible endpoint (`vllm serve`, `python -m llama_cpp.server`, a
    hosted API) at `base_url`. `accepts_images` says whether the engine is sent images: for
    `openai` only True sends image parts (nothing in the protocol says what the served model
    takes); in-process engines find out from the model when it is None, refuse True for a model
    without vision, and with False describe images in text even to a VLM. `model=None` means
    the packaged SmolLM2 GGUF for `llamacpp` and, for `openai`, the endpoint's first listed
    model (asked at once, so an unreachable endpoint fails here; with a model named it fails at
    the first request).
    `device` places llama.cpp layers (cpu or a GPU) and transformers models; `n_threads` is
    for llama.cpp only.
    """
    if kind not in ENGINES:
        raise GenerationError(f"unknown engine {kind!r}; choose one of {', '.join(ENGINES)}")
    if base_url is not None and kind != "openai":
        raise GenerationError(
            f"base_url is for the openai engine (vLLM and llama.cpp servers speak it); the {kind} "
            "engine runs in this process"
        )
    if kind == "openai":
        if base_url is None:
            raise GenerationError(
                "the openai engine needs base_url, e.g. http://127.0.0.1:8000/v1 of `vllm serve` "
                "or `python -m llama_cpp.server`"
            )
        from mmrag.generation.engines.openai_http import OpenAIEngine

        return OpenAIEngine(
            model,
            base_url=base_url,
            api_key=api_key,
            accepts_images=bool(accepts_images),
            timeout=timeout,
        )
    if kind == "llamacpp":
        from mmrag.generation.engines.llamacpp import LlamaCppEngine

        engine: Engine = LlamaCppEngine(model, n_ctx=n_ctx, device=device, n_threads=n_threads)
    elif model is None:
        raise GenerationError(f"the {kind} engine needs a model: a hub name or a local directory")
    elif kind == "vllm":
        from mmrag.generation.engines.vllm_local import VllmEngine

        engine = VllmEngine(model, n_ctx=n_ctx)
    else:
        from mmrag.generation.engines.transformers_local import TransformersEngine

        engine = TransformersEngine(model, device=device)
    return with_vision(engine, accepts_images)


def with_vision(engine: Engine, accepts_images: bool | None) -> Engine:
    """The in-process engine as told: images off when asked, an error when asked for images a
    model cannot take (llama.cpp here runs text-only GGUFs: serve a VLM GGUF with its
    projector from llama.cpp's server and use the openai engine)."""
    if accepts_images is None or accepts_images == engine.info.accepts_images:
        return engine
    if accepts_images:
        raise GenerationError(
            f"--vision: the {engine.info.name} model {engine.info.model!r} takes no images; use "
            "a vision-language model, or serve one (vLLM, llama.cpp's server with --mmproj) and "
            "pass --engine openai --vision"
        )
    engine.info = replace(engine.info, accepts_images=False)
    return engine
