"""Attribution of cited answers, as ALCE measures it (Gao et al., 2023), plus declines.

Per answer: citation recall is 1 when its cited sources together support it (0 when it cites
nothing), citation precision the share of its citations that are needed (each supports it
alone, or the others do not without it). An answer that declines ("the indexed sources do not
answer this question") makes no claim: it counts toward the decline rate and not toward
recall or precision. "Invented" marks an answer that states a number or name found in neither
the question nor any of its sources. Support is judged by the configured verifier
(`mmrag.generation.verification.attribution`), so these numbers are as good as that verifier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mmrag.generation.reading.question import read_question
from mmrag.generation.types import SourceLike
from mmrag.generation.verification.attribution import DECLINE, Attributor, invented_terms

METRICS = ("citation_recall", "citation_precision", "decline_rate", "invented_rate")


@dataclass(frozen=True)
class Attributed:
    """One answer to judge: the question, the answer as written (markers stripped) and the
    sources it cites (WebQA submissions list them as `sources`)."""

    question: str
    answer: str
    cited: Sequence[SourceLike]


def declined(answer: str) -> bool:
    return answer.strip() == DECLINE


def attribution_row(item: Attributed, attributor: Attributor) -> dict[str, float | None]:
    if declined(item.answer):
        return dict.fromkeys(METRICS, None) | {"decline_rate": 1.0}
    if not item.answer.strip():  # no answer at all: nothing claimed, nothing declined
        return dict.fromkeys(METRICS, None) | {"decline_rate": 0.0}
    question = read_question(item.question)
    scores = attributor.citation_scores(question, item.answer, item.cited)
    invented = invented_terms(question, item.answer, item.cited)
    return {
        "citation_recall": scores.recall if scores.recall is not None else 0.0,
        "citation_precision": scores.precision if scores.precision is not None else 0.0,
        "decline_rate": 0.0,
        "invented_rate": float(bool(invented)),
    }
