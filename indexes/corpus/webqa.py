"""Reader for the WebQA release JSON (`WebQA_train_val.json`, `WebQA_test.json`).

The file is one JSON object keyed by question guid, hundreds of MB large, so it is parsed
incrementally (ijson) one question at a time. Every positive and negative fact of every
question is a source; the caller de-duplicates across questions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ijson

from mmrag.indexes.corpus.limits import GuardedReader, JSONLimitError
from mmrag.indexes.errors import CorpusError
from mmrag.indexes.sources import Source

QCATES = ("text", "YesNo", "Others", "choose", "number", "color", "shape")

# The test release hides which facts are gold and lists them as img_Facts / txt_Facts.
_FACT_FIELDS = {
    "image": ("img_posFacts", "img_negFacts", "img_Facts"),
    "text": ("txt_posFacts", "txt_negFacts", "txt_Facts"),
}


def clean_text(value: Any) -> str:
    """Strip the literal double quotes WebQA wraps around many Q and A strings."""
    text = str(value).strip()
    while len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1].strip()
    return text


@dataclass(frozen=True, slots=True)
class WebQAQuestion:
    guid: str
    question: str
    answers: list[str]
    keywords: str | None
    qcate: str
    split: str
    topic: str
    pos_sources: list[Source] = field(default_factory=list)
    neg_sources: list[Source] = field(default_factory=list)

    @property
    def gold_source_ids(self) -> list[str]:
        return [source.id for source in self.pos_sources]

    @property
    def is_image_query(self) -> bool:
        """WebQA calls a question image-based when its gold sources are images."""
        return any(source.modality == "image" for source in self.pos_sources)


def _image_source(fact: dict[str, Any]) -> Source:
    image_id = str(int(fact["image_id"]))
    return Source(
        id=image_id,
        modality="image",
        title=clean_text(fact.get("title", "")),
        text=clean_text(fact.get("caption", "")),
        url=fact.get("url") or fact.get("imgUrl") or "",
        image_ref=image_id,
    )


def _text_source(fact: dict[str, Any]) -> Source:
    return Source(
        id=str(fact["snippet_id"]),
        modality="text",
        title=clean_text(fact.get("title", "")),
        text=clean_text(fact.get("fact", "")),
        url=fact.get("url") or "",
    )


_BUILDERS = {"image": _image_source, "text": _text_source}


def _facts(guid: str, record: dict[str, Any], field_name: str) -> list[Source]:
    modality = "image" if field_name.startswith("img") else "text"
    facts = record.get(field_name) or []
    if not isinstance(facts, list):
        raise CorpusError(f"question {guid}: {field_name} is not a list")
    try:
        return [_BUILDERS[modality](fact) for fact in facts]
    except (KeyError, TypeError, ValueError) as exc:
        raise CorpusError(f"question {guid}: malformed entry in {field_name} ({exc!r})") from None


def _question(guid: str, record: Any) -> WebQAQuestion:
    if not isinstance(record, dict) or "Q" not in record:
        raise CorpusError(f"question {guid}: not a WebQA question record (no 'Q' field)")
    answers = record.get("A") or []
    if isinstance(answers, str):
        answers = [answers]
    keywords = record.get("Keywords_A")
    positives = [s for name in ("img_posFacts", "txt_posFacts") for s in _facts(guid, record, name)]
    negatives = [
        s
        for name in ("img_negFacts", "img_Facts", "txt_negFacts", "txt_Facts")
        for s in _facts(guid, record, name)
    ]
    return WebQAQuestion(
        guid=str(record.get("Guid") or guid),
        question=clean_text(record["Q"]),
        answers=[clean_text(a) for a in answers],
        keywords=clean_text(keywords) if keywords is not None else None,
        qcate=str(record.get("Qcate", "")),
        split=str(record.get("split", "")),
        topic=str(record.get("topic", "")),
        pos_sources=positives,
        neg_sources=negatives,
    )


def iter_questions(path: str | Path) -> Iterator[WebQAQuestion]:
    """Yield questions one by one; a syntax error or nesting past MAX_DEPTH (see `limits`)
    names the file and the byte it stopped at."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            try:
                for guid, record in ijson.kvitems(GuardedReader(handle), "", use_float=True):
                    yield _question(guid, record)
            except ijson.JSONError as exc:
                reason = str(exc).splitlines()[0]  # ijson appends a caret drawing
                raise CorpusError(
                    f"{path}: malformed JSON near byte {handle.tell()} ({reason})"
                ) from None
            except JSONLimitError as exc:
                raise CorpusError(f"{path}: {exc} (near byte {handle.tell()})") from None
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CorpusError(f"{path}: is a directory, expected a WebQA JSON file") from None


def iter_sources(path: str | Path) -> Iterator[tuple[str, Source]]:
    """Every fact of every question, duplicates included (see `read_corpus`), each with where
    it stands: the file and its question."""
    for question in iter_questions(path):
        where = f"{path} (question {question.guid})"
        for source in (*question.pos_sources, *question.neg_sources):
            yield where, source
