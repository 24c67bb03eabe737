"""Toloka VQA (WSDM Cup 2023) CSVs: `image,width,height,left,top,right,bottom,question`.

Gold and predictions share the format; predictions need only `image,left,top,right,bottom` and
are joined to gold rows on `image` (one question per image in the release). Questions to answer
(`load_questions`, for `eval run`) may come without boxes, as the test CSVs did during the
competition: a row's box is then None.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from mmrag.evaluation.errors import DatasetError, record_error
from mmrag.evaluation.io import as_float, read_text
from mmrag.evaluation.metrics.iou import Box

BOX_COLUMNS = ("left", "top", "right", "bottom")


@dataclass(frozen=True, slots=True)
class TolokaItem:
    image: str
    box: Box | None  # None only for questions read without gold (`load_questions`)
    question: str = ""
    width: float | None = None
    height: float | None = None


def _box(row: dict[str, str], required: bool) -> Box | None:
    cells = [(row.get(column) or "").strip() for column in BOX_COLUMNS]
    if not required and not any(cells):
        return None
    return Box(*(as_float(cell) for cell in cells))


def _read(path: Path, *, boxes: bool, questions: bool) -> dict[str, TolokaItem]:
    """Rows keyed by image, in file order; `boxes` and `questions` say which are required."""
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
    required = ("image", *(BOX_COLUMNS if boxes else ()), *(("question",) if questions else ()))
    missing = [column for column in required if column not in (reader.fieldnames or [])]
    if missing:
        raise DatasetError(
            f"{path}: not a Toloka CSV (missing columns {', '.join(missing)}; expected "
            "image,width,height,left,top,right,bottom,question)"
        )
    items: dict[str, TolokaItem] = {}
    for row in reader:
        line = reader.line_num
        if None in row or any(row.get(column) is None for column in required):
            raise record_error(path, f"line {line}", "wrong number of fields")
        image = row["image"].strip()
        if not image:
            raise record_error(path, f"line {line}", "empty image")
        try:
            box = _box(row, boxes)
            width = as_float(row["width"]) if row.get("width") else None
            height = as_float(row["height"]) if row.get("height") else None
        except ValueError as exc:
            raise record_error(path, f"line {line} ({image})", f"bad number ({exc})") from None
        if questions and box is not None and (box.right < box.left or box.bottom < box.top):
            raise record_error(path, f"line {line} ({image})", "box has right<left or bottom<top")
        if image in items:
            raise record_error(path, f"line {line}", f"image {image} appears twice")
        items[image] = TolokaItem(image, box, row.get("question") or "", width, height)
    if not items:
        raise DatasetError(f"{path}: no rows")
    return items


def load_gold(path: str | Path) -> dict[str, TolokaItem]:
    """Gold rows keyed by image; an inverted gold box is corruption and is refused."""
    return _read(Path(path), boxes=True, questions=True)


def load_questions(path: str | Path) -> list[TolokaItem]:
    """The questions of a release CSV in file order, with their gold boxes where it has them."""
    return list(_read(Path(path), boxes=False, questions=True).values())


def load_predictions(path: str | Path) -> dict[str, Box]:
    """Predicted boxes keyed by image (an inverted predicted box simply scores IoU 0)."""
    rows = _read(Path(path), boxes=True, questions=False)
    return {image: item.box for image, item in rows.items()}  # type: ignore[misc]
