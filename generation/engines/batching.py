"""Concurrent requests to an in-process transformers model, decoded together in one `generate`.

On a GPU a decoding step of a small model costs nearly the same for thirty rows as for one
(the weights are read once a step either way, and eager decoding is mostly kernel launches), so
answers/s grows with the batch. Requests wait in one queue; one thread takes them in batches,
left-pads the prompts to one length, runs one `generate` over them, and routes each row's new
token ids to its own request, which stops on its own (max_tokens, EOS, its caller's stop
strings or cancellation). Only rows with the same sampling settings and the same input layout
(pixels or none) share a batch. A judge's requests for the next token's log-probabilities
(P("yes")) batch the same way, among themselves: one step of `generate` for all of them.

Batches that fill: that thread does nothing per request but collate and route ids. Each caller
prepares its own request in its own thread (chat template, tokens, a VLM's pixels), in parallel
with the others and with the batch being decoded, outside the model lock, and turns its ids
into text there too (`Request.deltas`). It announces the request before preparing it
(`Batcher.arriving`), so the batcher knows what is on its way. A batch is formed as soon as it
is full, or once nothing more can join it: no request is being prepared and, for the first
batch after an idle spell only, none has arrived for `window_s` (a few milliseconds, for
callers not yet announced: a pool's threads start one by one). So requests that arrived while
a batch decoded form the next one at once, and a lone caller waits `window_s` at most.

transformers' continuous-batching API (`generate_batch`, `init_continuous_batching`) was not
used: it takes token ids only, so a VLM's pixels cannot reach it, and while it runs it switches
the model's attention implementation under every other caller.

A batch is static: a row that is done returns to its caller at once and is no longer streamed,
but the rows still running keep its place until the batch ends; a batch whose rows are all done
stops at the next step. Imported by the transformers engine only (torch and transformers).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import StoppingCriteria, TextStreamer
from transformers.generation.streamers import BaseStreamer

from mmrag.generation.errors import GenerationCancelled, GenerationError

# The longest a batch with room waits, with no request arriving, for requests still being
# prepared (`Batcher.preparing_wait_s`): a VLM prompt's processor takes tens of milliseconds,
# and 32 of them share the GIL.
PREPARING_WAIT_S = 1.0


class TextDeltas(TextStreamer):
    """transformers' incremental detokenizer (whole words, never half a UTF-8 character),
    keeping the text it finalises for its caller instead of printing it."""

    def __init__(self, tokenizer: Any) -> None:
        super().__init__(tokenizer, skip_special_tokens=True)
        self.pieces: list[str] = []

    def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
        if text:
            self.pieces.append(text)

    def take(self) -> list[str]:
        pieces, self.pieces = self.pieces, []
        return pieces


@dataclass(eq=False)
class Request:
    """One caller's prompt (a batch of one, unpadded) and where its tokens go.

    `tokens` receives the row's token ids, then None when the row is done; `error` then says
    why it ended early, if it did. `halt` is set by the caller when it wants no more tokens.
    A request with `top_k` asks for no tokens but the next one's `top_k` log-probabilities
    (a judge's P("yes")), which `scores` holds, as (log-probabilities, token ids), once done.
    """

    inputs: dict[str, torch.Tensor]
    max_tokens: int
    temperature: float
    cancelled: Callable[[], bool] | None
    top_k: int | None = None
    scores: tuple[list[float], list[int]] | None = None
    tokens: queue.SimpleQueue[int | None] = field(default_factory=queue.SimpleQueue)
    halt: threading.Event = field(default_factory=threading.Event)
    error: Exception | None = None
    emitted: int = 0
    ended: bool = False

    def per_token(self, name: str) -> bool:
        """Whether input `name` runs along the prompt (ids, masks) rather than per image."""
        return self.inputs[name].shape == self.inputs["input_ids"].shape

    @property
    def key(self) -> tuple:
        """Requests with equal keys can share a batch: all of them asking for tokens or all for
        log-probabilities, one sampling setting for all rows, and inputs that collate (the same
        tensors, equal but for the axis they are joined on)."""
        layout = tuple(
            (name, "per token" if self.per_token(name) else tuple(value.shape[1:]), value.dtype)
            for name, value in sorted(self.inputs.items())
        )
        return (self.top_k is not None, self.temperature, layout)

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
        self.tokens.put(token)
        self.emitted += 1
        if token in eos or self.emitted >= self.max_tokens:
            self.end()

    def end(self, error: Exception | None = None) -> None:
        if not self.ended:
            self.ended, self.error = True, error
            self.tokens.put(None)

    def deltas(self, tokenizer: Any) -> Iterator[str]:
        """The row's text as its tokens come, decoded in the thread that iterates (the
        caller's), not in the batcher's."""
        text = TextDeltas(tokenizer)
        while (token := self.tokens.get()) is not None:
            text.put(torch.tensor([token]))
            yield from text.take()
        text.end()
        yield from text.take()


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

    A batch is formed once it is full or nothing more can join it (the module doc): while it
    has room, it waits for requests being prepared (up to `preparing_wait_s` without an
    arrival) and, for the first batch after an idle spell, `window_s` after the last arrival.
    `batches` counts the batches run, by size.
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
        self.preparing_wait_s = PREPARING_WAIT_S
        self.failure = failure  # what a failed batch's error says first
        self.batches: Counter[int] = Counter()
        self._pending: list[Request] = []
        self._preparing = 0
        self._last_arrival = 0.0  # time.monotonic() of the last announcement or request queued
        self._ready = threading.Condition()
        self._running = False

    @property
    def waiting(self) -> int:
        with self._ready:
            return len(self._pending)

    @property
    def preparing(self) -> int:
        with self._ready:
            return self._preparing

    @contextmanager
    def arriving(self) -> Iterator[Callable[[Request], None]]:
        """Announces a request that the caller is about to prepare, and gives the function that
        queues it once prepared. Leaving without queueing it (the prompt could not be built)
        withdraws the announcement."""
        with self._ready:
            self._preparing += 1
            self._last_arrival = time.monotonic()
            self._ready.notify()
        queued = False

        def submit(request: Request) -> None:
            nonlocal queued
            with self._ready:
                self._preparing -= 1
                queued = True
                self._pending.append(request)
                self._last_arrival = time.monotonic()
                self._ready.notify()
                if not self._running:
                    self._running = True
                    threading.Thread(target=self._loop, name="batcher", daemon=True).start()

        try:
            yield submit
        finally:
            if not queued:
                with self._ready:
                    self._preparing -= 1
                    self._ready.notify()

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

    def _gather(self, stragglers: bool) -> None:
        """Waits while the next batch has room and a request may still join it: one being
        prepared, or, where `stragglers`, one not yet announced."""
        with self._ready:
            while len(self._pending) < self.max_batch:
                if self._preparing:
                    patience = self.preparing_wait_s
                else:
                    patience = self.window_s if stragglers else 0.0
                quiet = time.monotonic() - self._last_arrival
                if quiet >= patience:
                    return
                self._ready.wait(patience - quiet)

    def _loop(self) -> None:
        stragglers = True  # the thread starts after an idle spell
        while True:
            self._gather(stragglers)
            stragglers = False
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
