"""vLLM in this process (`vllm.LLM`), for batch work on a GPU machine.

vLLM's offline API returns whole completions, so `stream` yields the answer as one delta; for
token streaming run `vllm serve MODEL` and use the openai engine, which is how a service should
use vLLM anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from mmrag.generation.engines.base import (
    EngineInfo,
    InProcess,
    Message,
    merge_logprob,
    stop_if_cancelled,
)
from mmrag.generation.errors import GenerationError

if TYPE_CHECKING:
    from mmrag.generation.citations import CitationFormat
    from mmrag.generation.types import Usage


class VllmEngine(InProcess):
    def __init__(self, model: str, *, n_ctx: int = 4096) -> None:
        """vLLM places the model on the GPUs it is given (CUDA_VISIBLE_DEVICES) itself."""
        try:
            import vllm
        except ImportError:
            raise GenerationError(
                "the vllm engine needs the vllm package: install mmrag[gpu] on a GPU machine, or "
                "use the openai engine against `vllm serve`"
            ) from None
        self.vllm = vllm
        try:
            self.llm = vllm.LLM(model=model, max_model_len=n_ctx)
        except (OSError, ValueError, RuntimeError) as exc:
            message = " ".join(str(exc).split())[:300]
            raise GenerationError(f"vllm cannot load {model!r}: {message}") from None
        model_config = getattr(self.llm.llm_engine, "model_config", None)
        multimodal = bool(getattr(model_config, "is_multimodal_model", False))
        self.info = EngineInfo(name="vllm", model=model, accepts_images=multimodal)

    def _request(self, messages: list[Message], params: Any) -> Any:
        """vLLM's RequestOutput: the prompt's token ids, and the completion in `outputs[0]`."""
        try:
            return self.llm.chat(messages, params, use_tqdm=False)[0]
        except (ValueError, RuntimeError) as exc:
            raise GenerationError(f"vllm failed on {self.info.model!r}: {exc}") from None

    def _complete(self, messages: list[Message], params: Any) -> Any:
        return self._request(messages, params).outputs[0]

    def _sampling(self, max_tokens: int, temperature: float, stop: list[str] | None) -> Any:
        return self.vllm.SamplingParams(
            max_tokens=max_tokens, temperature=temperature, stop=stop or None
        )

    def chat(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 96,
        temperature: float = 0.0,
        stop: list[str] | None = None,
    ) -> str:
        return self._complete(messages, self._sampling(max_tokens, temperature, stop)).text

    def stream(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 96,
        temperature: float = 0.0,
        stop: list[str] | None = None,
        constraint: CitationFormat | None = None,  # not enforced here: the prompt alone guides
        cancelled: Callable[[], bool] | None = None,
        usage: Usage | None = None,
    ) -> Iterator[str]:
        """`cancelled` is asked once, before the call: the offline API runs a call to its end,
        so a caller that gave up before it began costs nothing and one that gives up later
        waits for the whole completion (`vllm serve` with the openai engine stops sooner)."""
        stop_if_cancelled(cancelled)
        done = self._request(messages, self._sampling(max_tokens, temperature, stop))
        if usage is not None:
            usage.prompt_tokens = len(done.prompt_token_ids or ())
            usage.completion_tokens = len(done.outputs[0].token_ids)
        if done.outputs[0].text:
            yield done.outputs[0].text

    def next_token_logprobs(self, messages: list[Message], *, top_k: int = 20) -> dict[str, float]:
        params = self.vllm.SamplingParams(max_tokens=1, temperature=0.0, logprobs=top_k)
        first = self._complete(messages, params).logprobs[0]  # {token id: Logprob}
        table: dict[str, float] = {}
        for entry in first.values():
            merge_logprob(table, entry.decoded_token, float(entry.logprob))
        return table
