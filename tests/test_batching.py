"""Concurrent query encodes share forward passes and still get their own vectors."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from indexes.encoders.batching import BatchingEncoder


class Counting:
    """The real MiniLM, counting the forward passes it is asked for."""

    def __init__(self, encoder, delay_first: threading.Event | None = None):
        self.encoder = encoder
        self.info = encoder.info
        self.calls: list[int] = []
        self.gate = delay_first

    def encode_texts(self, texts):
        if self.gate is not None and not self.calls:
            self.gate.wait(5)  # hold the first pass so the others queue up behind it
        self.calls.append(len(texts))
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
        while batcher._requests.qsize() < 11:  # the first is held in the model, 11 wait
            threading.Event().wait(0.01)
        gate.set()
        results = [f.result() for f in futures]
    assert counting.calls == [1, 11]
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
