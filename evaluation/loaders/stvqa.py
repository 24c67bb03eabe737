"""ST-VQA release JSON (top-level `data` list) and the competition's prediction list."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmrag.evaluation.errors import DatasetError, record_error
from mmrag.evaluation.io import as_id, read_json

# Releases and re-packagings name the image path differently; the first present wins.
IMAGE_FIELDS = ("file_path", "file_name", "image")
PREDICTION_FORMAT = '[{"question_id": ..., "answer": "..."}, ...]'


@dataclass(frozen=True, slots=True)
class STVQAItem:
    question_id: str
    question: str
    answers: tuple[str, ...] | None  # None in the test release
    image: str  # path relative to the image root
    set_name: str = ""
    dataset: str = ""


def _answers(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list):
        raise ValueError("answers is not a list")
    return tuple(str(answer) for answer in value)


def _item(record: Any) -> STVQAItem:
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    image = next((record[name] for name in IMAGE_FIELDS if record.get(name)), None)
    if not isinstance(image, str):
        raise ValueError(f"no image path (looked for {', '.join(IMAGE_FIELDS)})")
    return STVQAItem(
        question_id=as_id(record.get("question_id")),
        question=str(record.get("question", "")),
        answers=_answers(record.get("answers")),
        image=image,
        set_name=str(record.get("set_name", "")),
        dataset=str(record.get("dataset", "")),
    )


def load_gold(path: str | Path) -> list[STVQAItem]:
    """Questions of an ST-VQA release file: `{"data": [{question_id, question, answers, ...}]}`."""
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise DatasetError(
            f"{path}: not an ST-VQA file (expected a JSON object with a 'data' list)"
        )
    items: list[STVQAItem] = []
    seen: set[str] = set()
    for number, record in enumerate(data["data"]):
        try:
            item = _item(record)
        except (ValueError, TypeError) as exc:
            qid = record.get("question_id") if isinstance(record, dict) else None
            raise record_error(path, f"data[{number}] (question_id {qid})", str(exc)) from None
        if item.question_id in seen:
            raise record_error(path, f"data[{number}]", f"question_id {item.question_id} twice")
        seen.add(item.question_id)
        items.append(item)
    if not items:
        raise DatasetError(f"{path}: no questions in 'data'")
    return items


def load_predictions(path: str | Path) -> dict[str, str]:
    """The submission list `[{"question_id": ..., "answer": "..."}]` as {question_id: answer}."""
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, list):
        raise DatasetError(
            f"{path}: not an ST-VQA prediction file (expected {PREDICTION_FORMAT}, "
            f"found a JSON {type(data).__name__})"
        )
    predictions: dict[str, str] = {}
    for number, record in enumerate(data):
        if not isinstance(record, dict) or "question_id" not in record or "answer" not in record:
            raise record_error(path, f"item {number}", f"expected {PREDICTION_FORMAT}")
        try:
            qid = as_id(record["question_id"])
        except ValueError as exc:
            raise record_error(path, f"item {number}", str(exc)) from None
        answer = record["answer"]
        if isinstance(answer, bool) or not isinstance(answer, str | int | float):
            raise record_error(path, f"item {number} (question_id {qid})", "answer is not text")
        if qid in predictions:
            raise record_error(path, f"item {number}", f"question_id {qid} predicted twice")
        predictions[qid] = str(answer)
    if not predictions:
        raise DatasetError(f"{path}: no predictions (expected {PREDICTION_FORMAT})")
    return predictions
