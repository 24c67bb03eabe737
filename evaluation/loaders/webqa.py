"""WebQA gold questions, the baseline release's prediction TSV, and submission files.

Gold questions come from the release JSON through `indexes.corpus.webqa.iter_questions`, the one
WebQA JSON reader in the project (streamed, quote-stripping, strict about malformed facts).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mmrag.evaluation.errors import DatasetError, record_error
from mmrag.evaluation.io import as_id, iter_lines, read_json
from mmrag.indexes.corpus.limits import JSONLimitError, loads
from mmrag.indexes.corpus.webqa import WebQAQuestion, iter_questions
from mmrag.indexes.errors import CorpusError

SUBMISSION_FORMAT = '{guid: {"sources": [id, ...], "answer": "..."}}'

# Columns the baseline release's TSV must have (it also has Q and Output_conf, unused here).
BASELINE_COLUMNS = ("Guid", "Qcate", "A", "Keywords_A", "Output")


@dataclass(frozen=True, slots=True)
class WebQAPrediction:
    """One question's prediction. `sources` is None where the file has none (baseline TSV)."""

    answer: str
    sources: tuple[str, ...] | None = None


def load_gold(
    path: str | Path, split: str | None = None, *, with_negatives: bool = False
) -> list[WebQAQuestion]:
    """Questions of a WebQA release JSON, optionally only those of one `split` (train/val/test).

    WebQA_train_val.json holds both splits, so scoring val predictions needs `split="val"`.
    Scoring needs only the gold (positive) sources, so the ~30 distractors per question are
    dropped unless `with_negatives` (a restricted-setting run needs them): on the full release
    that is over a million objects not kept in memory.
    """
    return load_gold_files([path], split, with_negatives=with_negatives)


def load_gold_files(
    paths: Sequence[str | Path], split: str | None = None, *, with_negatives: bool = False
) -> list[WebQAQuestion]:
    """`load_gold` over several release files (train_val and test), guids unique across them.

    A file without questions of `split` is fine as long as one of the files has some: the
    release splits val and test over two files, and a run may be handed both.
    """
    questions: list[WebQAQuestion] = []
    seen: set[str] = set()
    for path in map(Path, paths):
        try:
            for question in iter_questions(path):
                if question.guid in seen:
                    raise record_error(path, f"question {question.guid}", "guid appears twice")
                seen.add(question.guid)
                if split is None or question.split == split:
                    if not with_negatives:
                        question = replace(question, neg_sources=[])
                    questions.append(question)
        except CorpusError as exc:
            message = " ".join(str(exc).split())
            if not message.startswith(str(path)):
                message = f"{path}: {message}"
            raise DatasetError(message) from None
    if not questions:
        where = f" of split {split!r}" if split else ""
        names = ", ".join(str(path) for path in paths)
        raise DatasetError(
            f"{names}: no WebQA questions{where} found "
            "(expected a JSON object keyed by question guid)"
        )
    return questions


def _sources(path: Path, guid: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise record_error(path, f"prediction {guid}", "'sources' is not a list of source ids")
    try:
        return tuple(as_id(source) for source in value)
    except ValueError as exc:
        raise record_error(path, f"prediction {guid}", f"bad source id ({exc})") from None


def load_predictions(path: str | Path) -> dict[str, WebQAPrediction]:
    """A submission file: `{guid: {"sources": [...], "answer": "..."}}`.

    Image ids may be numbers or strings (both occur in submissions); both become strings, the
    form `WebQAQuestion.gold_source_ids` uses.
    """
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, dict):
        raise DatasetError(
            f"{path}: not a WebQA prediction file (expected {SUBMISSION_FORMAT}, "
            f"found a JSON {type(data).__name__})"
        )
    predictions: dict[str, WebQAPrediction] = {}
    for guid, record in data.items():
        if not isinstance(record, dict) or "answer" not in record or "sources" not in record:
            raise record_error(
                path,
                f"prediction {guid}",
                f"expected an object with 'sources' and 'answer' ({SUBMISSION_FORMAT})",
            )
        answer = record["answer"]
        if isinstance(answer, list) and len(answer) == 1:
            answer = answer[0]  # tolerated: a one-sentence answer wrapped in a list
        if not isinstance(answer, str):
            raise record_error(path, f"prediction {guid}", "'answer' is not a string")
        predictions[str(guid)] = WebQAPrediction(
            answer=answer, sources=_sources(path, guid, record["sources"])
        )
    if not predictions:
        raise DatasetError(f"{path}: no predictions (expected {SUBMISSION_FORMAT})")
    return predictions


def _json_cell(path: Path, line: int, column: str, text: str) -> Any:
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        raise record_error(
            path, f"line {line}", f"column {column} is not valid JSON ({exc.msg})"
        ) from None
    except JSONLimitError as exc:
        raise record_error(path, f"line {line}", f"column {column}: {exc}") from None


def _strings(path: Path, line: int, column: str, value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise record_error(path, f"line {line}", f"column {column} is not a JSON list of strings")
    return value


def load_baseline_tsv(
    path: str | Path,
) -> tuple[list[WebQAQuestion], dict[str, WebQAPrediction]]:
    """The WebQA baseline release's prediction TSV: gold columns plus the beam outputs.

    Parsed as the official eval script does (each line stripped, split on tabs; the prediction
    is the first element of the JSON list in `Output`; `Keywords_A` used as written). The TSV
    has no sources, so the predictions carry `sources=None`.
    """
    path = Path(path)
    lines: Iterable[tuple[int, str]] = iter_lines(path)
    header: list[str] | None = None
    questions: list[WebQAQuestion] = []
    predictions: dict[str, WebQAPrediction] = {}
    for number, raw in lines:
        if not raw.strip():
            continue
        fields = raw.strip().split("\t")
        if header is None:
            header = fields
            missing = [column for column in BASELINE_COLUMNS if column not in header]
            if missing:
                raise DatasetError(
                    f"{path}: not a WebQA baseline TSV (header lacks {', '.join(missing)}; "
                    f"expected columns {' '.join(BASELINE_COLUMNS)})"
                )
            key = {name: index for index, name in enumerate(header)}
            continue
        if len(fields) != len(header):
            raise record_error(
                path,
                f"line {number}",
                f"{len(fields)} tab-separated fields, header has {len(header)}",
            )
        guid = fields[key["Guid"]]
        if guid in predictions:
            raise record_error(path, f"line {number}", f"guid {guid} appears twice")
        answers = _strings(path, number, "A", _json_cell(path, number, "A", fields[key["A"]]))
        outputs = _json_cell(path, number, "Output", fields[key["Output"]])
        if not isinstance(outputs, list) or not outputs or not isinstance(outputs[0], str):
            raise record_error(
                path, f"line {number}", "column Output is not a non-empty JSON list of strings"
            )
        questions.append(
            WebQAQuestion(
                guid=guid,
                question=fields[key["Q"]] if "Q" in key else "",
                answers=answers,
                keywords=fields[key["Keywords_A"]],
                qcate=fields[key["Qcate"]],
                split="",
                topic="",
            )
        )
        predictions[guid] = WebQAPrediction(answer=outputs[0], sources=None)
    if header is None or not questions:
        raise DatasetError(f"{path}: no rows (expected a WebQA baseline TSV with a header)")
    return questions, predictions
