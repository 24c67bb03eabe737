"""A-OKVQA release files (`aokvqa_v1p0_{split}.json`) and prediction files.

The test split has no answers: its items load (for running a system) with the answer fields
None, and scoring refuses them with a clear message.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmrag.evaluation.errors import DatasetError, record_error
from mmrag.evaluation.io import as_id, read_json

PREDICTION_FORMAT = (
    '{question_id: {"multiple_choice": "...", "direct_answer": "...", "rationale": "..."}}'
)


@dataclass(frozen=True, slots=True)
class AOKVQAItem:
    question_id: str
    image_id: int
    question: str
    choices: tuple[str, ...]
    correct_choice_idx: int | None
    direct_answers: tuple[str, ...] | None
    difficult_direct_answer: bool
    rationales: tuple[str, ...]
    split: str | None = None

    def image_path(self, coco_dir: str | Path, split: str | None = None) -> Path:
        """COCO 2017 image path: `{coco_dir}/{split}2017/{image_id:012}.jpg`."""
        split = split or self.split
        if not split:
            raise ValueError("the COCO split is unknown; pass split=")
        return Path(coco_dir) / f"{split}2017" / f"{self.image_id:012}.jpg"


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError("not a list of strings")
    return tuple(value)


def _item(record: Any, split: str | None) -> AOKVQAItem:
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    choices = _strings(record.get("choices", []))
    correct = record.get("correct_choice_idx")
    if correct is not None:
        if isinstance(correct, bool) or not isinstance(correct, int):
            raise ValueError("correct_choice_idx is not an integer")
        if not 0 <= correct < len(choices):
            raise ValueError(f"correct_choice_idx {correct} is outside the {len(choices)} choices")
    answers = record.get("direct_answers")
    return AOKVQAItem(
        question_id=as_id(record.get("question_id")),
        image_id=int(record.get("image_id", -1)),
        question=str(record.get("question", "")),
        choices=choices,
        correct_choice_idx=correct,
        direct_answers=None if answers is None else _strings(answers),
        difficult_direct_answer=bool(record.get("difficult_direct_answer", False)),
        rationales=_strings(record.get("rationales") or []),
        split=split,
    )


def _split_from_name(path: Path) -> str | None:
    for split in ("train", "val", "test"):
        if f"_{split}" in path.stem:
            return split
    return None


def load_gold(path: str | Path) -> list[AOKVQAItem]:
    """A JSON list of question objects (the official release format)."""
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, list):
        raise DatasetError(
            f"{path}: not an A-OKVQA file (expected a JSON list of questions, "
            f"found a JSON {type(data).__name__})"
        )
    split = _split_from_name(path)
    items: list[AOKVQAItem] = []
    seen: set[str] = set()
    for number, record in enumerate(data):
        try:
            item = _item(record, split)
        except (ValueError, TypeError) as exc:
            qid = record.get("question_id") if isinstance(record, dict) else None
            raise record_error(path, f"item {number} (question_id {qid})", str(exc)) from None
        if item.question_id in seen:
            raise record_error(path, f"item {number}", f"question_id {item.question_id} twice")
        seen.add(item.question_id)
        items.append(item)
    if not items:
        raise DatasetError(f"{path}: no questions")
    return items


@dataclass(frozen=True, slots=True)
class AOKVQAPrediction:
    multiple_choice: str | None = None
    direct_answer: str | None = None
    rationale: str | None = None


def load_predictions(path: str | Path) -> dict[str, AOKVQAPrediction]:
    """`{question_id: {"multiple_choice": str, "direct_answer": str}}`, the leaderboard format.

    Either answer key may be absent (a file for one task only); an optional `rationale` string
    (or `rationales` list, first taken) carries a generated rationale for BLEU/METEOR.
    """
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, dict):
        raise DatasetError(
            f"{path}: not an A-OKVQA prediction file (expected {PREDICTION_FORMAT}, "
            f"found a JSON {type(data).__name__})"
        )
    predictions: dict[str, AOKVQAPrediction] = {}
    for qid, record in data.items():
        where = f"prediction {qid}"
        if not isinstance(record, dict) or not (
            {"multiple_choice", "direct_answer", "rationale", "rationales"} & record.keys()
        ):
            raise record_error(path, where, f"expected an object like {PREDICTION_FORMAT}")
        rationale = record.get("rationale")
        if rationale is None and isinstance(record.get("rationales"), list):
            rationale = next(iter(record["rationales"]), None)
        fields = {
            "multiple_choice": record.get("multiple_choice"),
            "direct_answer": record.get("direct_answer"),
            "rationale": rationale,
        }
        for name, value in fields.items():
            if value is not None and not isinstance(value, str):
                raise record_error(path, where, f"'{name}' is not a string")
        predictions[str(qid)] = AOKVQAPrediction(**fields)
    if not predictions:
        raise DatasetError(f"{path}: no predictions (expected {PREDICTION_FORMAT})")
    return predictions
