"""Ingestion of the real WebQA release format and of JSONL corpora."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmrag.indexes.corpus import CorpusStats, read_corpus
from mmrag.indexes.corpus.webqa import clean_text, iter_questions
from mmrag.indexes.errors import CorpusError


def test_clean_text_strips_literal_quote_wrapping():
    assert clean_text('"What color is it?"') == "What color is it?"
    assert clean_text('""nested""') == "nested"
    assert clean_text('He said "hi"') == 'He said "hi"'
    assert clean_text('"') == '"'


def test_questions_are_cleaned_and_split_into_gold_and_distractors(tiny_webqa):
    questions = {q.guid: q for q in iter_questions(tiny_webqa["json"])}
    q1 = questions["q1"]
    assert q1.question == "What color is the door of the Harbor Inn?"
    assert q1.answers == ["The door of the Harbor Inn is red."]
    assert q1.keywords == "red"
    assert q1.gold_source_ids == ["30000000"]
    assert q1.is_image_query
    assert {s.id for s in q1.neg_sources} == {"30000002", "s-shared"}
    q2 = questions["q2"]
    assert q2.keywords is None
    assert not q2.is_image_query
    assert q2.gold_source_ids == ["s-light"]


def test_every_fact_becomes_one_source_deduplicated_by_id(tiny_webqa):
    stats = CorpusStats()
    sources = list(read_corpus([tiny_webqa["json"]], stats))
    ids = [s.id for s in sources]
    assert sorted(ids) == sorted(["30000000", "30000001", "30000002", "s-light", "s-shared"])
    assert stats.duplicates == 1
    assert stats.by_modality == {"image": 3, "text": 2}
    image = next(s for s in sources if s.id == "30000000")
    assert (image.modality, image.title, image.text) == (
        "image",
        "Harbor Inn door",
        "The red door of the Harbor Inn.",
    )
    assert image.image_ref == "30000000"


def test_deduplication_spans_files(tiny_webqa):
    stats = CorpusStats()
    sources = list(read_corpus([tiny_webqa["json"], tiny_webqa["json"]], stats))
    assert len(sources) == 5
    assert stats.duplicates == 1 + 6  # one shared fact in the first pass, all six in the second


def test_test_release_unlabelled_facts_are_sources(tmp_path: Path):
    record = {
        "Q": "Is it?",
        "A": [],
        "Qcate": "YesNo",
        "split": "test",
        "img_Facts": [{"image_id": 30000005, "title": "t", "caption": "c"}],
        "txt_Facts": [{"snippet_id": "x1", "title": "t", "fact": "f"}],
    }
    path = tmp_path / "WebQA_test.json"
    path.write_text(json.dumps({"g": record}))
    [question] = iter_questions(path)
    assert question.pos_sources == []
    assert [s.id for s in question.neg_sources] == ["30000005", "x1"]


def test_truncated_json_names_file_and_position(tmp_path: Path, tiny_webqa):
    broken = tmp_path / "broken.json"
    broken.write_bytes(tiny_webqa["json"].read_bytes()[:-40])
    with pytest.raises(CorpusError, match=r"broken\.json: malformed JSON near byte \d+"):
        list(read_corpus([broken]))


def test_fact_without_its_id_is_a_named_error(tmp_path: Path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"g1": {"Q": "q", "txt_posFacts": [{"title": "no id"}]}}))
    with pytest.raises(CorpusError, match=r"question g1: malformed entry in txt_posFacts"):
        list(read_corpus([path]))


def test_unknown_extension_and_missing_file(tmp_path: Path):
    with pytest.raises(CorpusError, match=r"unknown corpus format '\.csv'"):
        list(read_corpus([tmp_path / "corpus.csv"]))
    with pytest.raises(CorpusError, match="no such file"):
        list(read_corpus([tmp_path / "missing.json"]))


def test_jsonl_corpus(tmp_path: Path):
    path = tmp_path / "mine.jsonl"
    lines = [
        {"id": "a", "modality": "text", "title": "A", "text": "alpha"},
        {"id": "b", "modality": "image", "title": "B", "text": "beta", "image": "img/b.png"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    sources = list(read_corpus([path]))
    assert [(s.id, s.modality, s.image_ref) for s in sources] == [
        ("a", "text", None),
        ("b", "image", "img/b.png"),
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"mine\.jsonl:2: malformed JSON"),
        ('{"title": "no id"}', r"mine\.jsonl:2: each line must be an object with an 'id'"),
        ('{"id": "x", "modality": "video"}', r"mine\.jsonl:2: modality must be 'image' or 'text'"),
        ('{"id": "x", "modality": "image"}', r"mine\.jsonl:2: an image source needs an 'image'"),
    ],
)
def test_jsonl_errors_name_the_line(tmp_path: Path, line: str, message: str):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"id": "ok", "text": "fine"}\n' + line + "\n")
    with pytest.raises(CorpusError, match=message):
        list(read_corpus([path]))


def test_a_source_stores_every_corpus_field():
    """`to_dict` is written out (faster than `asdict`): a field added to Source must be added
    there too, or the store would silently drop it."""
    from dataclasses import fields

    from mmrag.indexes.sources import Source

    source = Source(id="s1", modality="image", title="T", text="x", url="u", image_ref="1.jpg")
    record = source.to_dict()
    assert list(record) == [f.name for f in fields(Source) if f.name != "ocr"]
    assert Source.from_dict(record) == source
