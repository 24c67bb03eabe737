"""One question's path: retrieve candidates, select the sources that answer, write the answer.

Orchestration only, no model code: the parts are built once per process (`build_pipeline`) and
shared by the CLI, the HTTP service and the eval runs. A generator that fails, is down or runs
past its deadline does not fail the question: the answer comes back with its sources and
`generation_error` set.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass

from generation.types import Answer
from generation.writer import AnswerWriter
from retrieval.hybrid import HybridRetriever
from retrieval.rerank import Selection, SourceSelector
from retrieval.types import ModalityFilter


@dataclass
class QAResult:
    answer: Answer
    selection: Selection

    def relevance(self) -> dict[str, float]:
        return {scored.source.id: scored.relevance for scored in self.selection.selected}

    @classmethod
    def unanswered(cls, selection: Selection, timings: dict[str, float], error: str) -> QAResult:
        sources = [scored.source for scored in selection.selected]
        answer = Answer(
            text="",
            text_without_markers="",
            citations=[],
            sources=sources,
            timings=timings,
            generation_error=error,
        )
        return cls(answer, selection)


class QAPipeline:
    def __init__(
        self, retriever: HybridRetriever, selector: SourceSelector, writer: AnswerWriter
    ) -> None:
        self.retriever = retriever
        self.selector = selector
        self.writer = writer

    def select(
        self,
        question: str,
        *,
        k: int | None = None,
        modality: ModalityFilter = "all",
        max_sources: int | None = None,
    ) -> tuple[Selection, dict[str, float]]:
        started = time.perf_counter()
        candidates = self.retriever.search(question, k or self.selector.k, modality)
        retrieved = time.perf_counter()
        selection = self.selector.select(question, candidates, max_sources=max_sources)
        timings = {"retrieve_s": retrieved - started, "rerank_s": time.perf_counter() - retrieved}
        return selection, timings

    def answer(self, question: str, *, timeout_s: float | None = None, **options) -> QAResult:
        *_, result = self.stream(question, timeout_s=timeout_s, **options)
        return result

    def stream(
        self, question: str, *, timeout_s: float | None = None, **options
    ) -> Iterator[str | QAResult]:
        """Text deltas as they are generated, then the final result."""
        selection, timings = self.select(question, **options)
        yield from self.write(question, selection, timings, timeout_s=timeout_s)

    def write(
        self,
        question: str,
        selection: Selection,
        timings: dict[str, float],
        *,
        timeout_s: float | None = None,
    ) -> Iterator[str | QAResult]:
        """Generate from selected sources; past `timeout_s` stop and return the sources alone."""
        started = time.monotonic()
        sources = [scored.source for scored in selection.selected]
        parts = self.writer.stream(question, sources)
        with closing(parts):
            for part in parts:
                if isinstance(part, Answer):
                    part.timings = {**timings, **part.timings}
                    yield QAResult(part, selection)
                    return
                if timeout_s is not None and time.monotonic() - started > timeout_s:
                    elapsed = {**timings, "generate_s": time.monotonic() - started}
                    yield QAResult.unanswered(
                        selection, elapsed, f"generation timed out after {timeout_s:g} s"
                    )
                    return
                yield part
