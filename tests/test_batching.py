"""Concurrent query encodes share forward passes and still get their own vectors."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from mmrag.indexes.encoders.batching import BatchingEncoder


class Counting:
    """The real MiniLM, counting the forward passes it is asked for."""

    def __init__(self, encoder, delay_first: threading.Event | None = None):
        self.encoder = encoder
        self.info = encoder.info
        self.calls: list[int] = []
        self.gate = delay_first

    def encode_texts(self, texts):
        self.calls.append(len(texts))
        if self.gate is not None and len(self.calls) == 1:
            self.gate.wait(30)  # hold the first pass so the others queue up behind it
        return self.encoder.encode_texts(texts)


QUESTIONS = [f"What color is door number {n} of the Harbor Inn?" for n in range(24)]


def test_each_caller_gets_its_own_vectors(minilm):
    batcher = BatchingEncoder(minilm)
    with ThreadPoolExecutor(8) as pool:
        vectors = list(pool.map(lambda q: batcher.encode_texts([q])[0], QUESTIONS))
    np.testing.assert_allclose(np.stack(vectors), minilm.encode_texts(QUESTIONS), atol=1e-5)
    assert batcher.encode_texts(["a", "b"]).shape == (2, minilm.info.dim)


def test_waiting_queries_are_encoded_in_one_pass(minilm):
    gate = threading.Event()
    counting = Counting(minilm, gate)
    batcher = BatchingEncoder(counting)
    with ThreadPoolExecutor(12) as pool:
        futures = [pool.submit(batcher.encode_texts, [q]) for q in QUESTIONS[:12]]
        deadline = time.monotonic() + 30
        # The first pass (whatever had queued when the worker woke) is held at the gate; wait
        # until every other request is queued behind it.
        while not counting.calls or batcher._requests.qsize() < 12 - counting.calls[0]:
            assert time.monotonic() < deadline, (counting.calls, batcher._requests.qsize())
            time.sleep(0.01)
        gate.set()
        results = [f.result(timeout=30) for f in futures]
    assert len(counting.calls) == 2 and sum(counting.calls) == 12, counting.calls
    assert all(r.shape == (1, minilm.info.dim) for r in results)


def test_a_failure_reaches_every_waiting_caller_and_the_batcher_survives(minilm):
    class Failing:
        info = minilm.info

        def __init__(self):
            self.fail = True

        def encode_texts(self, texts):
            if self.fail:
                self.fail = False
                raise RuntimeError("out of memory")
            return minilm.encode_texts(texts)

    batcher = BatchingEncoder(Failing())
    with pytest.raises(RuntimeError, match="out of memory"):
        batcher.encode_texts(["q"])
    assert batcher.encode_texts(["q"]).shape == (1, minilm.info.dim)


def test_a_poisoned_request_fails_alone_not_the_others_in_its_pass(minilm):
    """A text the model cannot take (here: one with a lone surrogate, which the tokenizer
    refuses) shares a forward pass with good questions; only its own caller gets the error."""
    gate = threading.Event()
    counting = Counting(minilm, gate)
    batcher = BatchingEncoder(counting)
    poisoned = "door \ud800 inn"
    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(batcher.encode_texts, ["warm-up"])
        while not counting.calls:
            time.sleep(0.01)
        futures = {q: pool.submit(batcher.encode_texts, [q]) for q in [*QUESTIONS[:6], poisoned]}
        while batcher._requests.qsize() < 7:
            time.sleep(0.01)
        gate.set()
        assert first.result(timeout=30).shape == (1, minilm.info.dim)
        with pytest.raises(Exception):  # noqa: B017 - whatever the tokenizer raises
            futures.pop(poisoned).result(timeout=30)
        for question, future in futures.items():
            np.testing.assert_allclose(
                future.result(timeout=30)[0], minilm.encode_texts([question])[0], atol=1e-5
            )
    assert counting.calls[1] == 7  # they did share a pass, which failed as a whole
