"""Concurrent requests to an in-process transformers model, decoded together in one `generate`.

On a GPU a decoding step of a small model costs nearly the same for thirty rows as for one
(the weights are read once a step either way, and eager decoding is mostly kernel launches), so
answers/s grows with the batch. Requests wait in one queue; one thread takes them in batches,
left-pads the prompts to one length, runs one `generate` over them, and routes each row's new
tokens to its own request, which decodes and stops on its own (max_tokens, EOS, its caller's
stop strings or cancellation). Only rows with the same sampling settings and the same input
layout (pixels or none) share a batch.

transformers' continuous-batching API (`generate_batch`, `init_continuous_batching`) was not
used: it takes token ids only, so a VLM's pixels cannot reach it, and while it runs it switches
the model's attention implementation under every other caller.

A batch is static: a row that is done returns to its caller at once and is no longer streamed,
but the rows still running keep its place until the batch ends; a batch whose rows are all done
stops at the next step. Imported by the transformers engine only (torch and transformers).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import StoppingCriteria, TextIteratorStreamer
from transformers.generation.streamers import BaseStreamer

from mmrag.generation.errors import GenerationCancelled, GenerationError


@dataclass(eq=False)
class Request:
    """One caller's prompt (a batch of one, unpadded) and where its tokens go.

    `text` yields the decoded deltas and ends when the row is done; `error` then says why it
    ended early, if it did. `halt` is set by the caller when it wants no more tokens.
    """

    inputs: dict[str, torch.Tensor]
    max_tokens: int
    temperature: float
    cancelled: Callable[[], bool] | None
    text: TextIteratorStreamer
    halt: threading.Event = field(default_factory=threading.Event)
    error: Exception | None = None
    emitted: int = 0
    ended: bool = False

    def per_token(self, name: str) -> bool:
        """Whether input `name` runs along the prompt (ids, masks) rather than per image."""
        return self.inputs[name].shape == self.inputs["input_ids"].shape

    @property
    def key(self) -> tuple:
        """Requests with equal keys can share a batch: one sampling setting for all rows, and
        inputs that collate (the same tensors, equal but for the axis they are joined on)."""
        layout = tuple(
            (name, "per token" if self.per_token(name) else tuple(value.shape[1:]), value.dtype)
            for name, value in sorted(self.inputs.items())
        )
        return (self.temperature, layout)

    def wanted(self) -> bool:
        """Whether the row should go on; asks the caller's `cancelled`, and ends a row that is
        no longer wanted."""
        if self.halt.is_set():
            self.end()
        elif not self.ended and self.cancelled is not None:
            try:
                if self.cancelled():
                    self.end(GenerationCancelled("generation was cancelled by its caller"))
            except Exception as exc:  # a faulty callback ends its own row, not the batch
                self.end(GenerationError(f"asking whether to cancel failed: {exc}"))
        return not self.ended

    def feed(self, token: int, eos: frozenset[int]) -> None:
        if self.ended or self.halt.is_set():
            return
        self.text.put(torch.tensor([token]))
        self.emitted += 1
        if token in eos or self.emitted >= self.max_tokens:
            self.end()

    def end(self, error: Exception | None = None) -> None:
        if not self.ended:
            self.ended, self.error = True, error
            self.text.end()


def collate(rows: list[Request], pad_id: int) -> dict[str, torch.Tensor]:
    """One batch: tensors along the prompt left-padded to the longest (the pad id for token ids,
    0 elsewhere, so the attention mask hides the padding and each row's last position is its
    own last token); the others (pixels, image grids and sizes) joined along their first axis,
    which is how processors lay out the images of several prompts."""
    length = max(row.inputs["input_ids"].shape[-1] for row in rows)
    batch = {}
    for name in rows[0].inputs:
        values = [row.inputs[name] for row in rows]
        if rows[0].per_token(name):
            fill = pad_id if name == "input_ids" else 0
            values = [
                torch.nn.functional.pad(value, (length - value.shape[-1], 0), value=fill)
                for value in values
            ]
        batch[name] = torch.cat(values)
    return batch


class RowStreamer(BaseStreamer):
    """`generate`'s streamer for a batch: skips the prompt, hands each row its own token."""

    def __init__(self, rows: list[Request], eos: frozenset[int]) -> None:
        self.rows = rows
        self.eos = eos
        self.prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        for row, token in zip(self.rows, value.tolist(), strict=True):
            row.feed(token, self.eos)

    def end(self) -> None:
        for row in self.rows:
            row.end()


class RowsDone(StoppingCriteria):
    """Which rows are done after each forward pass, the prompt's included: a row that has its
    own max_tokens, or whose caller halted or cancelled it. A pass cannot stop half-way, so this
    is where a cancelled row stops. It also lets the queue drop requests cancelled while they
    wait, so that none of them waits for this batch to end to be told."""

    def __init__(self, rows: list[Request], prompt_length: int, sweep: Callable[[], None]) -> None:
        self.rows = rows
        self.prompt_length = prompt_length
        self.sweep = sweep

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        self.sweep()
        generated = input_ids.shape[-1] - self.prompt_length
        done = [generated >= row.max_tokens or not row.wanted() for row in self.rows]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class Batcher:
    """Runs queued requests in batches of up to `max_batch`, in one thread started on demand.

    After a batch, the next waits up to `window_s` until as many requests are queued as were
    in flight during it (its rows and those that queued meanwhile): the callers of a batch come
    back together with their next questions, and without the wait the first of them would run
    alone while the rest queue behind it. A lone caller never waits. `batches` counts the
    batches run, by size.
    """

    def __init__(
        self,
        run: Callable[[list[Request]], None],
        *,
        max_batch: int,
        window_s: float,
        failure: str,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self.run = run
        self.max_batch = max_batch
        self.window_s = window_s
        self.failure = failure  # what a failed batch's error says first
        self.batches: Counter[int] = Counter()
        self._pending: list[Request] = []
        self._ready = threading.Condition()
        self._running = False

    @property
    def waiting(self) -> int:
        with self._ready:
            return len(self._pending)

    def submit(self, request: Request) -> None:
        with self._ready:
            self._pending.append(request)
            self._ready.notify()
            if not self._running:
                self._running = True
                threading.Thread(target=self._loop, name="batcher", daemon=True).start()

    def sweep(self) -> None:
        """Drop queued requests whose callers no longer want them, asking each queued request
        once, those queued meanwhile included. Callbacks are asked outside the lock, so a slow
        one never holds up `submit`."""
        asked: set[int] = set()
        while True:
            with self._ready:
                self._pending = [row for row in self._pending if not row.ended]
                queued = [row for row in self._pending if id(row) not in asked]
            if not queued:
                return
            for row in queued:
                asked.add(id(row))
                row.wanted()

    def _await(self, count: int) -> None:
        with self._ready:
            self._ready.wait_for(lambda: len(self._pending) >= count, self.window_s)

    def _loop(self) -> None:
        expected = 1
        while True:
            if expected > 1:
                self._await(min(expected, self.max_batch))
            self.sweep()
            with self._ready:
                if not self._pending:
                    self._running = False
                    return
                key = self._pending[0].key
                batch = [row for row in self._pending if row.key == key][: self.max_batch]
                self._pending = [row for row in self._pending if row not in batch]
            self.batches[len(batch)] += 1
            try:
                self.run(batch)
            except Exception as exc:  # every row's caller is told; the thread goes on
                for row in batch:
                    row.end(GenerationError(f"{self.failure}: {exc}"))
            finally:
                for row in batch:
                    row.end()
            expected = len(batch) + self.waiting
