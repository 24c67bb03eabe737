"""A-OKVQA: MC and DA accuracy (x100, official semantics) and rationale BLEU / METEOR."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mmrag.evaluation.errors import DatasetError
from mmrag.evaluation.loaders.aokvqa import AOKVQAItem, AOKVQAPrediction
from mmrag.evaluation.metrics.aokvqa import direct_answer_score, multiple_choice_correct
from mmrag.evaluation.metrics.rationale import corpus_bleu, mean_meteor
from mmrag.evaluation.scoring import ScoreReport, join


def score(
    items: Sequence[AOKVQAItem],
    predictions: Mapping[str, AOKVQAPrediction],
    *,
    gold_label: str = "gold",
    pred_label: str = "predictions",
) -> ScoreReport:
    """MC over all questions; DA over those not marked `difficult_direct_answer`.

    A task none of the predictions answers (a DA-only file, say) is reported as null rather
    than 0; within a task, a question without a prediction scores 0 as in the official script
    with `strict=False`. An MC prediction that is not one of the choices scores 0 (the official
    strict mode would stop on it instead).
    """
    unanswered = [item.question_id for item in items if item.correct_choice_idx is None]
    if unanswered or any(item.direct_answers is None for item in items):
        raise DatasetError(
            f"{gold_label}: has no answers (correct_choice_idx / direct_answers), e.g. "
            f"question {(unanswered or [items[0].question_id])[0]}; the test split cannot be "
            "scored locally"
        )
    warnings: list[str] = []
    matched = join(
        [i.question_id for i in items], predictions, pred_label=pred_label, warnings=warnings
    )

    mc = None
    if any(p.multiple_choice is not None for p in predictions.values()):
        correct = [
            multiple_choice_correct(p.multiple_choice, item.choices, item.correct_choice_idx)
            if p is not None and p.multiple_choice is not None
            else 0.0
            for item, p in zip(items, matched, strict=True)
        ]
        mc = 100.0 * sum(correct) / len(correct)

    da = None
    if any(p.direct_answer is not None for p in predictions.values()):
        scores = [
            direct_answer_score(p.direct_answer, item.direct_answers or ())
            if p is not None and p.direct_answer is not None
            else 0.0
            for item, p in zip(items, matched, strict=True)
            if not item.difficult_direct_answer
        ]
        da = 100.0 * sum(scores) / len(scores) if scores else None

    bleu = meteor = None
    pairs = [
        (p.rationale, list(item.rationales))
        for item, p in zip(items, matched, strict=True)
        if p is not None and p.rationale is not None and item.rationales
    ]
    if pairs:
        hypotheses = [hyp for hyp, _ in pairs]
        references = [refs for _, refs in pairs]
        bleu = corpus_bleu(hypotheses, references)
        meteor = mean_meteor(hypotheses, references)
        with_refs = sum(bool(item.rationales) for item in items)
        if len(pairs) < with_refs:
            warnings.append(
                f"rationales scored on the {len(pairs)} of {with_refs} questions that have one"
            )
    return ScoreReport({"mc": mc, "da": da, "bleu": bleu, "meteor": meteor}, warnings)
