"""What answers one WebQA question: one `QAPipeline.answer` call, as `mmrag ask` and the
service make, in the setting's candidates: `full` retrieves from the whole index,
`restricted` ranks the question's own positive and negative facts (about 40) with the same
retrievers and fusion. This process, or each Ray worker, builds one with `build_runner`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mmrag.evaluation.errors import EvaluationError
from mmrag.indexes.corpus.webqa import WebQAQuestion
from mmrag.indexes.sources import Source

if TYPE_CHECKING:  # the pipeline loads only when a run starts; `mmrag --help` stays instant
    from mmrag.core.pipeline import QAPipeline
    from mmrag.core.settings import AbstainPolicy, Settings

SETTINGS = ("full", "restricted")


def submission_id(source: Source) -> int | str:
    """As the WebQA eval server takes them: image ids are integers, snippet ids strings."""
    return int(source.id) if source.modality == "image" else source.id


def own_facts(question: WebQAQuestion) -> list[str]:
    """The restricted setting's candidates: the question's positive and negative facts."""
    return [source.id for source in (*question.pos_sources, *question.neg_sources)]


def check_facts_indexed(questions: Sequence[WebQAQuestion], pipeline: QAPipeline) -> None:
    """Refuse before the first question, not midway, an index built from other WebQA files."""
    store = pipeline.retriever.collection.store
    missing = [
        (question.guid, source_id)
        for question in questions
        for source_id in own_facts(question)
        if store.row_of(source_id) is None
    ]
    if missing:
        guid, source_id = missing[0]
        raise EvaluationError(
            f"{len(missing)} facts of the selected questions are not in the index "
            f"{pipeline.retriever.collection.root} (e.g. source {source_id!r} of question "
            f"{guid}); the restricted setting needs an index built from the same WebQA files"
        )


class WebQARunner:
    """Answers one question in the chosen setting; returns what the checkpoint stores."""

    def __init__(
        self,
        pipeline: QAPipeline,
        setting: str,
        *,
        k: int | None = None,
        abstain: AbstainPolicy = "never",
    ) -> None:
        if setting not in SETTINGS:
            raise EvaluationError(f"unknown setting {setting!r}; use {' or '.join(SETTINGS)}")
        self.pipeline = pipeline
        self.setting = setting
        self.k = k
        self.abstain = abstain

    def __call__(self, question: WebQAQuestion) -> dict[str, Any]:
        started = time.perf_counter()
        candidates = own_facts(question) if self.setting == "restricted" else None
        result = self.pipeline.answer(
            question.question, k=self.k, candidates=candidates, abstain=self.abstain
        )
        answer = result.answer
        return {
            "prediction": {
                "sources": [submission_id(scored.source) for scored in result.selection.selected],
                "answer": answer.text_without_markers,
            },
            "citations": [citation.source_id for citation in answer.citations],
            "attribution": answer.attribution,
            "timings": {**result.timings.as_dict(), "total_s": time.perf_counter() - started},
            "generation_error": answer.generation_error,
        }


def build_runner(
    settings: Settings, *, setting: str, k: int | None, abstain: AbstainPolicy
) -> WebQARunner:
    """A runner with its own pipeline: what each Ray worker of `--executor ray` builds."""
    from mmrag.core.components import build_pipeline

    return WebQARunner(build_pipeline(settings), setting, k=k, abstain=abstain)
