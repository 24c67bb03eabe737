"""Concurrent requests to the transformers engine share one `generate` and still get exactly
their own answers: the tiny random Llama and LLaVA of test_generation_transformers.py, loaded
by path. Greedy rows in a left-padded float32 batch write what each writes alone; a row that
ends (its max_tokens, a stop string, cancellation) leaves the others untouched.

Which requests share a batch is made certain, never left to timing: every request's
`cancelled` first waits until all of them are queued (the batcher asks it before it forms a
batch), and the engine's `batcher.batches` says which batches ran. Where a test shows that the
batcher does not wait, its windows are LONG, twice what the test waits for a batch to run: a
batcher that waited would fail the test, not merely slow it. Nothing asserts time.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import pytest

from mmrag.generation.engines.transformers_local import TransformersEngine
from mmrag.generation.errors import GenerationCancelled, GenerationError
from mmrag.generation.prompts import image_part
from tests.test_generation_transformers import png, tiny_llama, tiny_llava  # noqa: F401

QUESTIONS = [
    "When was the lighthouse of Dunmore built?",
    "Who?",
    "What colour is the door of the Harbor Inn, and who painted it?",
    "How tall is the tower?",
]


def ask(question: str) -> list[dict]:
    return [{"role": "user", "content": question}]


def ask_about(color: str) -> list[dict]:
    parts = [{"type": "text", "text": f"Is this {color}?"}, image_part(png(color))]
    return [{"role": "user", "content": parts}]


GIVE_UP_S = 60.0
LONG = 2 * GIVE_UP_S  # a batcher window no test sees the end of


def until(condition: Callable[[], bool]) -> None:
    """Waits until `condition()`; gives up after GIVE_UP_S rather than hang (what the test
    asserts then fails)."""
    give_up = time.monotonic() + GIVE_UP_S
    while not condition() and time.monotonic() < give_up:
        time.sleep(0.001)


def until_queued(engine: TransformersEngine, count: int, preparing: int = 0) -> None:
    """Waits until `count` requests are queued and `preparing` are being prepared."""
    batcher = engine.batcher
    until(lambda: batcher.waiting >= count and batcher.preparing >= preparing)


class Gate:
    """A `cancelled` that holds the batcher at its first question until `count` requests are
    queued, so that they form one batch; then it is never cancelled, or as `then(cancelled)`
    says."""

    def __init__(self, engine: TransformersEngine, count: int) -> None:
        self.engine = engine
        self.count = count
        self.opened = threading.Event()

    def __call__(self) -> bool:
        if not self.opened.is_set():
            until_queued(self.engine, self.count)
            self.opened.set()
        return False

    def then(self, cancelled: Callable[[], bool] | None) -> Callable[[], bool]:
        return self if cancelled is None else lambda: self() or cancelled()


def after(calls: int) -> Callable[[], bool]:
    """Cancelled from its (calls+1)-th question on; records how often it was asked."""
    asked: list[bool] = []

    def cancelled() -> bool:
        asked.append(len(asked) >= calls)
        return asked[-1]

    cancelled.asked = asked  # type: ignore[attr-defined]
    return cancelled


def stream_text(engine: TransformersEngine, messages: list[dict], **options) -> str | Exception:
    """The reply's text, or the exception it ended with."""
    text = ""
    try:
        with closing(engine.stream(messages, **options)) as deltas:
            for delta in deltas:
                text += delta
    except GenerationError as exc:  # GenerationCancelled included
        return exc
    return text


def together(engine: TransformersEngine, calls: list[dict]) -> list[str | Exception]:
    """Every call's `stream_text` from a thread of its own, held until all are queued; a
    call's own `cancelled` is asked after the gate's."""
    gate = Gate(engine, len(calls))
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [
            pool.submit(
                stream_text,
                engine,
                **{**call, "cancelled": gate.then(call.get("cancelled"))},
            )
            for call in calls
        ]
        return [future.result() for future in futures]


@pytest.fixture(scope="module")
def llama(tiny_llama: Path) -> TransformersEngine:  # noqa: F811
    return TransformersEngine(str(tiny_llama), device="cpu")


def test_a_batch_writes_what_each_request_writes_alone(llama: TransformersEngine) -> None:
    """Prompts of four lengths (left padding from 0 to ~50 tokens), each with its own
    max_tokens, one cut by a stop string taken from its own reply: the row that stops early
    and the rows that run on each get their own text, as when answered one at a time."""
    alone = llama.chat(ask(QUESTIONS[2]), max_tokens=12)
    stop = alone[len(alone) // 2 :][:2]
    calls = [
        {"messages": ask(QUESTIONS[0]), "max_tokens": 12},
        {"messages": ask(QUESTIONS[1]), "max_tokens": 3},
        {"messages": ask(QUESTIONS[2]), "max_tokens": 12, "stop": [stop]},
        {"messages": ask(QUESTIONS[3]), "max_tokens": 8},
    ]
    solo = [stream_text(llama, **call) for call in calls]
    before = Counter(llama.batcher.batches)
    batched = together(llama, calls)
    assert llama.batcher.batches - before == Counter({4: 1})  # one batch of four
    assert batched == solo
    assert solo[2] == alone[: alone.index(stop)]
    assert all(isinstance(text, str) and text for text in solo)


def test_a_vlm_batch_gives_each_row_its_own_image(tiny_llava: Path) -> None:  # noqa: F811
    """Pixels of three photos joined in one batch reach their own rows: each answer is the one
    its prompt and photo give alone."""
    engine = TransformersEngine(str(tiny_llava), device="cpu")
    calls = [{"messages": ask_about(color), "max_tokens": 6} for color in ("red", "blue", "green")]
    solo = [stream_text(engine, **call) for call in calls]
    batched = together(engine, calls)
    assert engine.batcher.batches == Counter({1: 3, 3: 1})
    assert batched == solo


def test_only_requests_that_can_share_a_batch_do(tiny_llava: Path) -> None:  # noqa: F811
    """Greedy and sampled rows, and rows with and without a photo, run in separate batches."""
    engine = TransformersEngine(str(tiny_llava), device="cpu")
    calls = [
        {"messages": ask_about("red"), "max_tokens": 4},
        {"messages": ask("Is this red?"), "max_tokens": 4},
        {"messages": ask_about("blue"), "max_tokens": 4},
        {"messages": ask_about("blue"), "max_tokens": 4, "temperature": 0.7},
    ]
    results = together(engine, calls)
    assert all(isinstance(text, str) for text in results)
    assert engine.batcher.batches == Counter({2: 1, 1: 2})


def test_stragglers_join_a_first_batch_until_it_is_full(tiny_llama: Path) -> None:  # noqa: F811
    """Three requests come one by one, each once the last is queued (a pool's threads start so):
    within the straggler window they join one batch, which runs as soon as it is full."""
    engine = TransformersEngine(str(tiny_llama), device="cpu", max_batch=3, batch_window_s=LONG)
    calls = [{"messages": ask(question), "max_tokens": 4} for question in QUESTIONS[:3]]
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = []
        for queued, call in enumerate(calls):
            until_queued(engine, queued)
            futures.append(pool.submit(stream_text, engine, **call))
        texts = [future.result() for future in futures]
    assert engine.batcher.batches == Counter({3: 1})
    assert texts == [stream_text(llama_alone(tiny_llama), **call) for call in calls]


def llama_alone(folder: Path) -> TransformersEngine:
    return TransformersEngine(str(folder), device="cpu", max_batch=1)


def test_requests_that_arrive_while_a_batch_decodes_form_the_next_at_once(
    tiny_llama: Path,  # noqa: F811
) -> None:
    """A third request arrives while a batch of two decodes: when that batch ends it runs at
    once, alone, though its batch has room and the straggler window is LONG."""
    engine = TransformersEngine(str(tiny_llama), device="cpu", max_batch=2, batch_window_s=LONG)
    calls = [{"messages": ask(question), "max_tokens": 6} for question in QUESTIONS[:3]]
    with ThreadPoolExecutor(1) as pool:
        late: list = []

        def third_arrives(asked: list[int] = []) -> bool:  # noqa: B006
            asked.append(1)
            if len(asked) == 2:  # after the batch's first forward pass
                late.append(pool.submit(stream_text, engine, **calls[2]))
                until_queued(engine, 1)
            return False

        texts = together(engine, [calls[0], {**calls[1], "cancelled": third_arrives}])
        until(lambda: engine.batcher.batches.total() == 2)
        assert engine.batcher.batches == Counter({2: 1, 1: 1})
        texts.append(late[0].result())
    assert texts == [stream_text(llama_alone(tiny_llama), **call) for call in calls]


def test_a_batch_waits_for_the_requests_being_prepared(tiny_llama: Path) -> None:  # noqa: F811
    """A request whose prompt is still being built (held here in its chat template) is waited
    for, though the straggler window is zero: the two run as one batch."""
    engine = TransformersEngine(str(tiny_llama), device="cpu", max_batch=2, batch_window_s=0)
    engine.batcher.preparing_wait_s = LONG
    calls = [{"messages": ask(question), "max_tokens": 6} for question in QUESTIONS[:2]]
    solo = [stream_text(engine, **call) for call in calls]
    release = threading.Event()
    template = engine.tokenizer.apply_chat_template

    def held(messages: list[dict], **options):
        if messages[-1]["content"] == QUESTIONS[0]:
            release.wait(60)
        return template(messages, **options)

    engine.tokenizer.apply_chat_template = held
    before = Counter(engine.batcher.batches)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(stream_text, engine, **calls[0])
        until_queued(engine, 0, preparing=1)
        second = pool.submit(stream_text, engine, **calls[1])
        until_queued(engine, 1, preparing=1)
        release.set()
        assert [first.result(), second.result()] == solo
    assert engine.batcher.batches - before == Counter({2: 1})


def test_prompts_are_built_and_answers_decoded_outside_the_model_and_the_batcher(
    llama: TransformersEngine,
) -> None:
    """While another user holds the model, a request's prompt is built and its batch formed
    (its caller's thread needs no lock); its tokens are turned into text in its caller's
    thread, never in the batcher's."""
    alone = stream_text(llama, ask(QUESTIONS[0]), max_tokens=8)
    threads: list[str] = []
    decode = llama.tokenizer.decode

    def recorded(*args, **options):
        threads.append(threading.current_thread().name)
        return decode(*args, **options)

    llama.tokenizer.decode = recorded
    try:
        before = Counter(llama.batcher.batches)
        with ThreadPoolExecutor(1, thread_name_prefix="caller") as pool:
            with llama._model_lock:
                reply = pool.submit(stream_text, llama, ask(QUESTIONS[0]), max_tokens=8)
                until(lambda: llama.batcher.batches != before)
                assert llama.batcher.batches - before == Counter({1: 1})
                assert not reply.done()
            assert reply.result() == alone
    finally:
        del llama.tokenizer.decode
    assert threads and all(name.startswith("caller") for name in threads), set(threads)


def test_a_row_cancelled_mid_batch_stops_alone(llama: TransformersEngine) -> None:
    """The second row is cancelled after three forward passes: its caller is told at once, it
    is never asked again (its row is done), and the rows beside it finish with their own
    answers."""
    calls = [{"messages": ask(question), "max_tokens": 10} for question in QUESTIONS[:3]]
    solo = [stream_text(llama, **call) for call in calls]
    cancelled = after(3)  # asked before the batch and after each pass: cancelled at the third
    results = together(llama, [calls[0], {**calls[1], "cancelled": cancelled}, calls[2]])
    assert isinstance(results[1], GenerationCancelled)
    assert cancelled.asked == [False, False, False, True]  # type: ignore[attr-defined]
    assert [results[0], results[2]] == [solo[0], solo[2]]
    assert stream_text(llama, **calls[1]) == solo[1]  # the engine answers the next request


def test_a_callback_that_fails_ends_its_own_row_only(llama: TransformersEngine) -> None:
    calls = [{"messages": ask(question), "max_tokens": 6} for question in QUESTIONS[:2]]
    solo = [stream_text(llama, **call) for call in calls]

    asked: list[int] = []

    def broken() -> bool:  # fails after the prompt's pass, the row being in the batch
        asked.append(1)
        if len(asked) > 2:
            raise RuntimeError("deadline store unreachable")
        return False

    before = Counter(llama.batcher.batches)
    results = together(llama, [calls[0], {**calls[1], "cancelled": broken}])
    assert llama.batcher.batches - before == Counter({2: 1})
    assert results[0] == solo[0]
    assert isinstance(results[1], GenerationError)
    assert not isinstance(results[1], GenerationCancelled)
    assert "deadline store unreachable" in str(results[1])
    assert stream_text(llama, **calls[1]) == solo[1]  # and the engine goes on


def test_a_batch_whose_rows_are_all_cancelled_stops(llama: TransformersEngine) -> None:
    """Cancelled after its third forward pass, a lone 60-token request runs no fourth."""
    passes: list[int] = []
    hook = llama.model.register_forward_hook(lambda *_: passes.append(1))
    try:
        result = stream_text(llama, ask(QUESTIONS[0]), max_tokens=60, cancelled=after(3))
    finally:
        hook.remove()
    assert isinstance(result, GenerationCancelled)
    assert len(passes) == 3


def test_a_request_cancelled_while_queued_never_runs(llama: TransformersEngine) -> None:
    """A request waiting behind a running batch is dropped as soon as it is cancelled: its
    caller is told while that batch still runs, and no batch ever holds it."""
    told = threading.Event()
    seen_told: list[bool] = []
    waiting_ready = threading.Event()

    def first_row_cancelled() -> bool:
        if len(seen_told) == 1:  # the batch is running: let the second request queue
            waiting_ready.set()
            until_queued(llama, 1)
        if len(seen_told) == 3:  # two steps later, has the queued one been told?
            told.wait(60)
        seen_told.append(told.is_set())
        return False

    def queued() -> str | Exception:
        waiting_ready.wait(60)
        result = stream_text(llama, ask(QUESTIONS[1]), max_tokens=5, cancelled=lambda: True)
        told.set()
        return result

    before = Counter(llama.batcher.batches)
    with ThreadPoolExecutor(2) as pool:
        running = pool.submit(
            stream_text, llama, ask(QUESTIONS[0]), max_tokens=8, cancelled=first_row_cancelled
        )
        dropped = pool.submit(queued)
        assert isinstance(dropped.result(), GenerationCancelled)
        assert isinstance(running.result(), str)
    assert seen_told[3] is True  # told while the first batch had tokens left to write
    assert llama.batcher.batches - before == Counter({1: 1})


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(
    not cuda_available(),
    reason="the GPU decode path (CUDA attention kernels over a left-padded batch) needs a CUDA "
    "device; this machine has none",
)
def test_a_batch_on_the_gpu_writes_what_each_request_writes_alone(
    tiny_llama: Path,  # noqa: F811
    tiny_llava: Path,  # noqa: F811
) -> None:
    """The same check on CUDA, in float32 (bf16 answers of a batch and of one request may part
    where two tokens are nearly tied; bench/batched_answers.py counts how often)."""
    for folder, calls in (
        (tiny_llama, [{"messages": ask(q), "max_tokens": 10} for q in QUESTIONS]),
        (tiny_llava, [{"messages": ask_about(c), "max_tokens": 6} for c in ("red", "blue")]),
    ):
        engine = TransformersEngine(str(folder), device="cuda")
        engine.model.float()
        solo = [stream_text(engine, **call) for call in calls]
        assert together(engine, calls) == solo
        assert engine.batcher.batches[len(calls)] == 1
