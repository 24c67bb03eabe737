"""VLQA (image + passage multiple-choice reasoning) items and predictions.

The release's field names are not pinned down, so the mapping from our fields to the names met
in the wild lives in one table, `FIELDS`, tried in order. The file may be a JSON list (the
official `val.json`, which the VLQA site's `static/evaluate.py` reads as a list of items with an
`answer` index), an object with a `data`/`questions` list, an object keyed by question id, or
JSON Lines. Items of a list without an id are known by their position.

Predictions come in the official format, `{"val": [answer index per item, in gold order]}` (any
one split name as the key), or as `{question_id: answer index}`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmrag.evaluation.errors import DatasetError, record_error
from mmrag.evaluation.io import as_id, read_json, read_json_or_jsonl

# Our field -> candidate names in a VLQA record, first present wins. Edit here, nowhere else.
FIELDS: dict[str, tuple[str, ...]] = {
    "id": ("qid", "question_id", "id", "guid", "uid"),
    "image": ("image", "image_path", "image_file", "img", "img_path", "image_name", "images"),
    "passage": ("passage", "text", "context", "paragraph"),
    "question": ("question", "query", "q"),
    "choices": ("answer_choices", "choices", "options", "candidates"),
    "answer": ("answer", "answer_idx", "answer_index", "correct_answer", "label", "gold_label"),
}
PREDICTION_FORMAT = '{"val": [answer index per item, in gold order]} or {question_id: index}'


@dataclass(frozen=True, slots=True)
class VLQAItem:
    question_id: str
    image: str | list[str]
    passage: str
    question: str
    choices: tuple[str, ...]
    answer: int | None  # index into choices; None when the file has no answers


def _field(record: dict[str, Any], name: str) -> Any:
    for key in FIELDS[name]:
        if key in record and record[key] is not None:
            return record[key]
    return None


def _index(value: Any, choices: tuple[str, ...]) -> int:
    """An answer given as an index (int or digit string), a letter (A-D) or the choice text."""
    if isinstance(value, bool):
        raise ValueError(f"answer {value!r} is not a choice index")
    if isinstance(value, int):
        index = value
    elif isinstance(value, str) and value.strip().isdigit():
        index = int(value.strip())
    elif isinstance(value, str) and value in choices:
        index = choices.index(value)
    elif isinstance(value, str) and len(value.strip()) == 1 and value.strip().isalpha():
        index = ord(value.strip().upper()) - ord("A")
    else:
        raise ValueError(f"answer {value!r} is not a choice index")
    if not 0 <= index < len(choices):
        raise ValueError(f"answer index {index} is outside the {len(choices)} choices")
    return index


def _item(record: Any, fallback_id: str | None) -> VLQAItem:
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    raw_id = _field(record, "id")
    qid = as_id(raw_id if raw_id is not None else fallback_id)
    choices = _field(record, "choices")
    if not isinstance(choices, list) or len(choices) < 2:
        raise ValueError(f"no answer choices (looked for {', '.join(FIELDS['choices'])})")
    choices_t = tuple(str(choice) for choice in choices)
    answer = _field(record, "answer")
    image = _field(record, "image")
    return VLQAItem(
        question_id=qid,
        image=image if isinstance(image, list) else str(image or ""),
        passage=str(_field(record, "passage") or ""),
        question=str(_field(record, "question") or ""),
        choices=choices_t,
        answer=None if answer is None else _index(answer, choices_t),
    )


def _records(data: Any) -> list[tuple[str | None, Any]]:
    if isinstance(data, list):
        return [(str(position), record) for position, record in enumerate(data)]
    if isinstance(data, dict):
        for key in ("data", "questions", "items"):
            if isinstance(data.get(key), list):
                return [(str(position), record) for position, record in enumerate(data[key])]
        if data and all(isinstance(value, dict) for value in data.values()):
            return [(str(key), record) for key, record in data.items()]
    raise ValueError("expected a list of VLQA items, an object with a 'data' list, or JSON Lines")


def load_gold(path: str | Path) -> list[VLQAItem]:
    path = Path(path)
    data = read_json_or_jsonl(path)  # its DatasetError is a ValueError, already one line
    try:
        records = _records(data)
    except ValueError as exc:
        raise DatasetError(f"{path}: not a VLQA file ({exc})") from None
    items: list[VLQAItem] = []
    seen: set[str] = set()
    for number, (key, record) in enumerate(records):
        try:
            item = _item(record, key)
        except (ValueError, TypeError) as exc:
            where = f"item {number}" + (f" ({key})" if key and key != str(number) else "")
            raise record_error(path, where, str(exc)) from None
        if item.question_id in seen:
            raise record_error(path, f"item {number}", f"question id {item.question_id} twice")
        seen.add(item.question_id)
        items.append(item)
    if not items:
        raise DatasetError(f"{path}: no questions")
    return items


def _index_value(path: Path, where: str, value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise record_error(path, where, f"{value!r} is not an answer index ({PREDICTION_FORMAT})")
    return value


def load_predictions(path: str | Path) -> dict[str, int] | list[int]:
    """The official `{"val": [index, ...]}` as the list (aligned with the gold file by
    position: `by_position`), or `{question_id: index}`; an index may be a digit string."""
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, dict):
        raise DatasetError(
            f"{path}: not a VLQA prediction file (expected {PREDICTION_FORMAT}, "
            f"found a JSON {type(data).__name__})"
        )
    if len(data) == 1 and isinstance(official := next(iter(data.values())), list):
        return [_index_value(path, f"entry {n}", value) for n, value in enumerate(official)]
    predictions = {
        str(qid): _index_value(path, f"prediction {qid}", value) for qid, value in data.items()
    }
    if not predictions:
        raise DatasetError(f"{path}: no predictions (expected {PREDICTION_FORMAT})")
    return predictions


def by_position(
    items: Sequence[VLQAItem], predictions: Sequence[int], *, pred_label: str = "predictions"
) -> dict[str, int]:
    """Official predictions keyed by question id: entry n answers gold item n, and the official
    script refuses a file whose length differs from the gold file's."""
    if len(predictions) != len(items):
        raise DatasetError(
            f"{pred_label}: {len(predictions)} answers for {len(items)} questions; the official "
            "format needs one answer per gold item, in gold order"
        )
    return {item.question_id: answer for item, answer in zip(items, predictions, strict=True)}


def official_predictions(split: str, answers: Sequence[int]) -> dict[str, list[int]]:
    """What `static/evaluate.py` reads: `{split: [answer index per gold item, in order]}`."""
    return {split: list(answers)}
