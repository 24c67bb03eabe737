"""One question's path: retrieve candidates, select the sources that answer, write the answer.

Orchestration only, no model code: the parts are built once per process (`build_pipeline`) and
shared by the CLI, the HTTP service and the eval runs, and each of them makes one call per
question, `QAPipeline.run` (or `answer`, which waits for the run's result).

A run works in a thread of its own and hands its tokens over a queue, so the engine is held
only while that thread generates: a consumer that stops reading (a client gone mid-stream)
cannot keep the engine locked. The one deadline of a request (`Deadline`, which may have begun
before the run, with an upload's OCR) bounds generation from both sides: the worker's engine
stops at it (between tokens, and within llama.cpp's prompt), and the consumer stops waiting at
it (plus a grace) when an engine hangs. A generator that fails, is down or runs past the
deadline does not fail the question: the answer comes back with its sources and
`generation_error` set.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from mmrag.core.attachments import AttachedImage
from mmrag.core.conversation import Resolver, RuleResolver
from mmrag.core.steps import StepContext, after_generation
from mmrag.generation.grounding import CitationGrounder
from mmrag.generation.reading.question import read_question
from mmrag.generation.scene_text import SceneTextAnswerer
from mmrag.generation.types import Answer, SourceLike, Turn
from mmrag.generation.verification.attribution import AbstainPolicy, Attributor
from mmrag.generation.writer import AnswerWriter
from mmrag.retrieval.hybrid import HybridRetriever
from mmrag.retrieval.rerank import ScoredSource, Selection, SourceSelector
from mmrag.retrieval.types import ModalityFilter
from mmrag.runtime.deadline import Deadline, Stopped, stage, working

# How long past the deadline a consumer waits for the worker to report the timeout itself.
DEADLINE_GRACE_S = 0.5
# Every run's worker thread until its work ends, whoever still waits for it.
_workers: set[threading.Thread] = set()


def runs_in_flight() -> int:
    """Runs whose worker still works: after Ctrl-C, or past a deadline the engine outlived.

    Such a worker may be inside llama.cpp or onnxruntime, and a Python process that finalises
    while a daemon thread runs native code is aborted by the C++ runtime ("terminate called
    without an active exception"), so the `mmrag` command then leaves without finalising.
    """
    return sum(worker.is_alive() for worker in list(_workers))


@dataclass
class Timings:
    """Seconds per stage of one question; `first_token_s` counts from the start of generation.
    `stopped_in` names the stage the deadline (or the client's leaving) stopped, if one did."""

    ocr_s: float = 0.0  # reading the text of an attached photo
    resolve_s: float = 0.0  # a follow-up made a standalone question from the conversation
    retrieve_s: float = 0.0
    rerank_s: float = 0.0
    generate_s: float = 0.0
    first_token_s: float = 0.0
    verify_s: float = 0.0  # checking each citation against its source
    ground_s: float = 0.0  # boxing the region of each cited image that supports the answer
    stopped_in: str = ""  # "ocr", "resolve", "retrieve", "generate", "verify" or "ground"

    def as_dict(self) -> dict[str, float | str]:
        """The seconds per stage, and `stopped_in` when a stage was stopped."""
        found: dict[str, float | str] = asdict(self)
        if not self.stopped_in:
            del found["stopped_in"]
        return found

    def add(self, stage: str, seconds: float) -> None:
        setattr(self, stage, getattr(self, stage) + seconds)


@dataclass
class QAResult:
    answer: Answer
    selection: Selection
    timings: Timings = field(default_factory=Timings)
    question: str = ""  # the question answered: a follow-up as resolved from the conversation

    def relevance(self) -> dict[str, float]:
        return {scored.source.id: scored.relevance for scored in self.selection.selected}


RUNNERS_UP = 4  # retrieved sources below the selection an answer may still be read from


def runners_up(selection: Selection) -> tuple[SourceLike, ...]:
    chosen = {scored.source.id for scored in selection.selected}
    rest = [scored.source for scored in selection.considered if scored.source.id not in chosen]
    return tuple(rest[:RUNNERS_UP])


def unanswered(selection: Selection, timings: Timings, error: str, question: str) -> QAResult:
    """The selected sources without an answer, saying why."""
    sources = [scored.source for scored in selection.selected]
    answer = Answer("", "", [], sources, timings={}, generation_error=error)
    return QAResult(answer, selection, timings, question)


@dataclass(frozen=True)
class Asked:
    """What a caller asks of one run besides where to look (retrieval's options)."""

    question: str
    conversation: tuple[Turn, ...] = ()  # the turns before the question, oldest first
    abstain: AbstainPolicy | None = None  # None: the pipeline's policy
    max_tokens: int | None = None  # at most the writer's own
    temperature: float = 0.0


class QARun:
    """One question in flight: iterate for the answer's tokens as they are written; `result`
    holds the final answer once iteration ends (`wait()` skips the tokens).

    `close()` stops the run at its next token and may be called from any thread, any number of
    times: the service calls it when a client goes away. It cancels the run's deadline.

    Every stage checks the deadline between bounded steps (`runtime.deadline`): past it, the
    run ends with the sources selected so far and no answer (an answer checked in part is no
    checked answer), `generation_error` saying why and `timings.stopped_in` where; boxing,
    the last step, leaves a checked answer without boxes. `when_stopped` runs a callback once
    the worker has stopped working (the service frees the answer slot then, not before).
    """

    def __init__(
        self, pipeline: QAPipeline, asked: Asked, deadline: Deadline, options: dict
    ) -> None:
        self.result: QAResult | None = None
        self.deadline = deadline
        self._events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._generating: tuple[Selection, Timings, float, str] | None = None
        self._stopped = False
        self._on_stop: list[Callable[[], None]] = []
        self._stop_lock = threading.Lock()
        self._worker = threading.Thread(
            target=self._work, args=(pipeline, asked, options), name="qa-run", daemon=True
        )
        _workers.add(self._worker)
        self._worker.start()

    def __enter__(self) -> QARun:
        return self

    def __exit__(self, *_: object) -> None:
        """Close, never waiting: the worker stops at its next token. A process that exits
        while it still runs must not finalise (`runs_in_flight`)."""
        self.close()

    def close(self) -> None:
        """Stop at the next token; never blocks, so an event loop may call it."""
        self.deadline.cancel()

    def when_stopped(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the worker has stopped working: now, if it has (on this
        thread), else on the worker's thread as it stops."""
        with self._stop_lock:
            if not self._stopped:
                self._on_stop.append(callback)
                return
        callback()

    def wait(self) -> QAResult:
        for _ in self:
            pass
        assert self.result is not None
        return self.result

    def __iter__(self) -> Iterator[str]:
        while self.result is None:
            kind, value = self._next_event()
            if kind == "token":
                yield value
            elif kind == "generating":
                self._generating = value
            elif kind == "done":
                self.result = value
            else:  # "error": retrieval or selection failed, e.g. on bad input
                raise value

    def _next_event(self) -> tuple[str, Any]:
        """The worker's next event; once it generates, at most until the deadline (and a
        grace). Retrieval is not waited out: it has no answer to fall back on."""
        deadline = None if self._generating is None else self.deadline.at
        if deadline is None:
            return self._events.get()
        try:
            wait = max(0.0, deadline - time.monotonic()) + DEADLINE_GRACE_S
            return self._events.get(timeout=wait)
        except queue.Empty:
            # The engine hangs (say, before its first token): answer without it, and let the
            # worker stop at its next token, if one ever comes.
            self.close()
            selection, timings, started, question = self._generating
            timings = replace(timings, generate_s=time.monotonic() - started)
            return "done", unanswered(selection, timings, self.deadline.timed_out(), question)

    def _work(self, pipeline: QAPipeline, asked: Asked, options: dict) -> None:
        event: tuple[str, Any]
        try:
            with working(self.deadline):
                event = ("done", self._answer(pipeline, asked, options))
        except BaseException as exc:  # handed to the consumer, who raises it
            event = ("error", exc)
        finally:
            _workers.discard(threading.current_thread())
            with self._stop_lock:
                self._stopped = True
                callbacks, self._on_stop = self._on_stop, []
        for callback in callbacks:
            callback()
        self._events.put(event)

    def _answer(self, pipeline: QAPipeline, asked: Asked, options: dict) -> QAResult:
        """The whole answer, or what there is of it where a stage stopped (`Stopped`)."""
        abstain = asked.abstain or pipeline.abstain
        question, image = asked.question, options["image"]
        timings, selection = Timings(), Selection(selected=[], considered=[])
        # Past the deadline already: the user's photo was read until it ran out. The sources
        # still come back (retrieval is short), found by the question as asked.
        read_out = image is not None and self.deadline.stopped()
        try:
            if asked.conversation and not read_out:
                with stage("resolve"), _timed(timings, "resolve_s"):
                    question = pipeline.resolver.resolve(asked.conversation, question)
            with stage("retrieve"):
                # read once, for every stage after; past the deadline too where the photo used
                # it up, or an unread question lost the sources with the answer
                with working(None) if read_out else nullcontext():
                    asked_question = read_question(question)
                selection = pipeline.select(question, timings, **options)
                self.deadline.check("ocr" if read_out else None)
            started = time.monotonic()
            self._events.put(("generating", (selection, timings, started, question)))
            answer = pipeline.writer.write(
                asked_question,
                [scored.source for scored in selection.selected],
                on_token=lambda delta: self._events.put(("token", delta)),
                interrupt=self.deadline.why_stop,
                max_tokens=asked.max_tokens,
                temperature=asked.temperature,
            )
            timings.generate_s = answer.timings["generate_s"]
            timings.first_token_s = answer.timings["first_token_s"]
            if answer.generation_error and self.deadline.stopped():  # the engine stopped
                timings.stopped_in = "generate"
                return QAResult(answer, selection, timings, question)
            context = StepContext(asked_question, image, abstain == "auto", runners_up(selection))
            for step in pipeline.steps:
                try:
                    with stage(step.stage), _timed(timings, step.timing):
                        self.deadline.check()
                        answer = step(answer, context)
                except Stopped as stopped:
                    if step.needed:
                        raise
                    timings.stopped_in = stopped.stage  # the answer is whole without it
                    break
            return QAResult(answer, selection, timings, question)
        except Stopped as stopped:
            timings.stopped_in = stopped.stage
            return unanswered(selection, timings, stopped.reason, question)


@contextmanager
def _timed(timings: Timings, name: str) -> Iterator[None]:
    """The block's seconds added to `timings.<name>`, however it ends."""
    began = time.perf_counter()
    try:
        yield
    finally:
        timings.add(name, time.perf_counter() - began)


class QAPipeline:
    def __init__(
        self,
        retriever: HybridRetriever,
        selector: SourceSelector,
        writer: AnswerWriter,
        attributor: Attributor,
        *,
        abstain: AbstainPolicy = "auto",
        grounder: CitationGrounder | None = None,
        scene_text: SceneTextAnswerer | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        """`grounder`, when given, boxes the region of each cited image that supports the
        answer (`Citation.box`), within the run's deadline. `scene_text`, when given, answers
        from an attached photo's text what no source supports (`read_off_the_image`). They
        and the attributor make the steps after generation (`core.steps`). `resolver` makes a
        follow-up a standalone question from the conversation before it (`core.conversation`;
        the offline rules by default)."""
        self.retriever = retriever
        self.selector = selector
        self.writer = writer
        self.attributor = attributor
        self.abstain = abstain
        self.grounder = grounder
        self.steps = after_generation(attributor, scene_text=scene_text, grounder=grounder)
        self.resolver = resolver or RuleResolver()

    def run(
        self,
        question: str,
        *,
        k: int | None = None,
        modality: ModalityFilter = "all",
        max_sources: int | None = None,
        candidates: Sequence[str] | None = None,
        timeout_s: float | None = None,
        deadline: Deadline | None = None,
        abstain: AbstainPolicy | None = None,
        image: AttachedImage | None = None,
        conversation: Sequence[Turn] = (),
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> QARun:
        """Start answering; `candidates` (source ids) restricts retrieval to ranking those, as
        in WebQA's restricted setting. The run stops at `deadline` (a request's, begun before
        the run), else `timeout_s` from now; `abstain` overrides the pipeline's policy for
        this question. With `conversation` (the turns before this one), the question is first
        resolved into one that stands alone, and that is what is answered and returned.
        `max_tokens` (capped by the writer's) and `temperature` are the caller's for this
        answer."""
        asked = Asked(question, tuple(conversation), abstain, max_tokens, temperature)
        options = {"k": k, "modality": modality, "max_sources": max_sources, "image": image}
        options["candidates"] = candidates
        return QARun(self, asked, deadline or Deadline(timeout_s), options)

    def answer(self, question: str, **options: Any) -> QAResult:
        """`run` and wait for the result."""
        with self.run(question, **options) as running:
            return running.wait()

    def select(
        self,
        question: str,
        timings: Timings,
        *,
        k: int | None = None,
        modality: ModalityFilter = "all",
        max_sources: int | None = None,
        candidates: Sequence[str] | None = None,
        image: AttachedImage | None = None,
    ) -> Selection:
        """The selected sources; an attached image comes first, as source [1]."""
        started = time.perf_counter()
        if candidates is None:
            found = self.retriever.search(question, k or self.selector.k, modality)
        else:
            found = self.retriever.rank_among(question, candidates)
        retrieved = time.perf_counter()
        selection = self.selector.select(question, found, max_sources=max_sources)
        if image is not None:
            # The photo is something to cite already: retrieved sources join it only when
            # relevant, never as the best of a poor lot (the selector's min_sources rule).
            relevant = [s for s in selection.selected if s.relevance >= self.selector.threshold]
            selection.selected[:] = [ScoredSource(image, 1.0, 1.0, 0), *relevant]
        timings.retrieve_s = retrieved - started
        timings.ocr_s = image.ocr_s if image is not None else 0.0
        timings.rerank_s = time.perf_counter() - retrieved
        return selection
