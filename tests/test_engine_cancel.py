"""Engines stop a reply their caller no longer wants while they work, not only between tokens.

A question that timed out during a long prompt used to hold llama.cpp until the whole prompt
was read; now the packaged SmolLM2 stops within one batch of it, the engine is free at once,
and the next question gets exactly the answer a fresh engine gives. Everything here is asserted
on state (tokens read, the lock, the answers), never on time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import count
from pathlib import Path

import pytest

from mmrag.generation import AnswerWriter
from mmrag.generation.engines import load_engine
from mmrag.generation.engines.llamacpp import LlamaCppEngine
from mmrag.generation.errors import GenerationCancelled
from mmrag.generation.prompts import answer_messages
from tests.helpers import SAMPLE_JSON
from tests.test_attribution import Src
from tests.test_generation_transformers import tiny_llama  # noqa: F401  (a fixture)

TIMED_OUT = "generation timed out after 30 s"
LIGHTHOUSE = "When was the lighthouse of Dunmore built?"


LIGHT = Src("s-light", "text", "Dunmore lighthouse", "The lighthouse of Dunmore was built in 1887.")


def sample_snippets(n: int) -> list[Src]:
    """The sample corpus's first `n` distinct text snippets: a prompt of real, varied text."""
    snippets: dict[str, Src] = {}
    for question in json.loads(Path(SAMPLE_JSON).read_text()).values():
        for fact in question["txt_posFacts"] + question["txt_negFacts"]:
            snippets.setdefault(
                fact["snippet_id"], Src(fact["snippet_id"], "text", fact["title"], fact["fact"])
            )
    return list(snippets.values())[:n]


LONG = [LIGHT, *sample_snippets(4)]  # about 300 tokens: several batches of N_BATCH
# Small batches make a prompt of a few hundred tokens span several decode calls, so that
# stopping between them is tested without reading thousands of tokens (the default is 512).
N_BATCH = 64


def engine_fresh() -> LlamaCppEngine:
    """An engine of its own: its KV cache holds only what a test puts there."""
    return LlamaCppEngine(n_ctx=2048, n_batch=N_BATCH)


def after_calls(n: int, reason: str = TIMED_OUT) -> Callable[[], str | None]:
    """An interrupt that gives `reason` from its (n+1)-th call on: the engine asks before each
    batch of the prompt, so with n=1 the first batch is read and the second is not."""
    calls = count()
    return lambda: reason if next(calls) >= n else None


def prompt_tokens_at_least(engine: LlamaCppEngine, sources: list[Src]) -> int:
    """Tokens of the prompt's user message alone; the templated prompt has a few more."""
    content = answer_messages(LIGHTHOUSE, sources)[-1]["content"]
    return len(engine.llm.tokenize(content.encode(), add_bos=False, special=True))


def read_tokens(engine: LlamaCppEngine) -> list[int]:
    """Every token in the engine's KV cache, in order: the last prompt and what it wrote."""
    return engine.llm.input_ids[: engine.llm.n_tokens].tolist()


def answer(engine: LlamaCppEngine, sources: list[Src]) -> tuple[str, list[str], list[int]]:
    """The writer's answer, its deltas, and the tokens the engine read to write it."""
    deltas: list[str] = []
    written = AnswerWriter(engine).write(LIGHTHOUSE, sources, on_token=deltas.append)
    assert written.generation_error is None
    return written.text, deltas, read_tokens(engine)


def test_a_cancelled_prompt_stops_within_a_batch_and_frees_the_engine() -> None:
    engine = engine_fresh()
    batch = engine.llm.n_batch
    assert prompt_tokens_at_least(engine, LONG) > 2 * batch
    written = AnswerWriter(engine).write(LIGHTHOUSE, LONG, interrupt=after_calls(1))
    assert engine.llm.n_tokens == batch  # one batch of the prompt read, the rest not
    assert written.generation_error == TIMED_OUT  # the caller's reason, not llama.cpp's
    assert written.text == "" and written.citations == []
    assert engine.lock.acquire(blocking=False)  # nobody holds the engine any more
    engine.lock.release()
    assert engine.llm.cancelled is None  # the next call is not asked the last one's question


def test_the_stream_itself_raises_and_releases_the_lock() -> None:
    engine = engine_fresh()
    interrupt = after_calls(1)
    deltas = engine.stream(
        answer_messages(LIGHTHOUSE, LONG), cancelled=lambda: interrupt() is not None
    )
    with pytest.raises(GenerationCancelled):
        next(deltas)
    assert engine.llm.n_tokens == engine.llm.n_batch
    assert engine.lock.acquire(blocking=False)
    engine.lock.release()


@pytest.fixture(scope="module")
def fresh_answers() -> tuple[tuple, tuple]:
    """The short and the long question's answers from an engine that was never cancelled."""
    fresh = engine_fresh()
    return answer(fresh, [LIGHT]), answer(fresh, LONG)


@pytest.mark.parametrize("where", ["mid-prompt", "mid-answer"])
def test_after_a_cancelled_reply_the_next_answers_are_a_fresh_engines(
    where: str, fresh_answers: tuple[tuple, tuple]
) -> None:
    """Before and after the cancelled reply, token for token at temperature 0: the short
    question shares the long one's system prompt (a reused prefix), and the long question asked
    again reuses exactly what the cancelled one read."""
    short_expected, long_expected = fresh_answers
    engine = engine_fresh()
    assert answer(engine, [LIGHT]) == short_expected
    deltas: list[str] = []
    interrupt = (
        after_calls(1) if where == "mid-prompt" else lambda: TIMED_OUT if len(deltas) >= 2 else None
    )
    cancelled = AnswerWriter(engine).write(
        LIGHTHOUSE, LONG, on_token=deltas.append, interrupt=interrupt
    )
    assert cancelled.generation_error == TIMED_OUT
    assert len(deltas) == (0 if where == "mid-prompt" else 2)
    assert answer(engine, [LIGHT]) == short_expected
    assert answer(engine, LONG) == long_expected


def test_a_server_reply_stops_at_the_next_line(llama_server: str) -> None:
    """The openai engine checks between the server's events and closes the connection."""
    served = load_engine("openai", base_url=llama_server)
    messages = answer_messages(LIGHTHOUSE, [LIGHT])
    full = list(served.stream(messages, max_tokens=16))
    got: list[str] = []
    with pytest.raises(GenerationCancelled):
        for delta in served.stream(messages, max_tokens=16, cancelled=lambda: bool(got)):
            got.append(delta)
    assert len(full) > 1 and got == full[:1]
    assert list(served.stream(messages, max_tokens=16)) == full  # the server answers on


def test_a_transformers_prompt_stops_at_its_first_token(tiny_llama: Path) -> None:  # noqa: F811
    """A forward pass cannot stop half-way: `cancelled` is asked after the prompt's, once."""
    engine = load_engine("transformers", str(tiny_llama), device="cpu")
    asked: list[bool] = []

    def cancelled() -> bool:
        asked.append(True)
        return True

    with pytest.raises(GenerationCancelled):
        list(engine.stream([{"role": "user", "content": LIGHTHOUSE}], cancelled=cancelled))
    assert len(asked) == 1
