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


def test_ids_are_strings_or_integers_and_a_taken_id_with_other_content_is_refused(
    tmp_path: Path,
):
    """Issue 37: ids were stringified whatever they were (null became "None"), and a second
    source with a taken id (the integer 1 after the string "1") and other content was dropped
    with only a count."""
    path = tmp_path / "mine.jsonl"
    for ident, kind in [("null", "null"), ("true", "bool"), ("1.5", "float"), ("[1]", "list")]:
        path.write_text(f'{{"id": {ident}, "text": "alpha"}}\n')
        with pytest.raises(
            CorpusError,
            match=rf"mine\.jsonl:1: 'id' must be a string or an "
            rf"integer, got {kind}",
        ):
            list(read_corpus([path]))
    lines = [
        '{"id": 1, "text": "alpha"}',
        '{"id": "2", "text": "beta"}',
        '{"id": 2, "text": "beta"}',
    ]
    path.write_text("\n".join([*lines, '{"id": "1", "text": "gamma"}']) + "\n")
    with pytest.raises(CorpusError) as refused:
        list(read_corpus([path]))
    assert str(refused.value).startswith(f"{path}:4: id '1' is taken by {path}:1, with other")
    stats = CorpusStats()
    kept = list(read_corpus([path], stats, on_duplicate="first"))
    assert [(s.id, s.text) for s in kept] == [("1", "alpha"), ("2", "beta")]
    assert stats.duplicates == 2  # the same "2" again, and the other "1"


def test_a_nul_in_an_image_path_is_one_line(tmp_path: Path):
    """Issue 37: it was a ValueError traceback from the build's path resolution."""
    from tests.helpers import assert_one_line_error, run_mmrag

    corpus = tmp_path / "mine.jsonl"
    corpus.write_text('{"id": "a", "modality": "image", "image": "a\\u0000.png"}\n')
    result = run_mmrag("index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "x"))
    assert_one_line_error(result, f"{corpus}:1: the 'image' path holds a NUL character")


def test_titles_and_texts_past_what_an_index_keeps_are_cut_and_said_once(
    tmp_path: Path, monkeypatch, capsys
):
    """Issue 37: a source of 1,000,000 characters or more was indexed whole and was a 500 on
    every question that retrieved it. The build cuts what it keeps (lowered here: a few KB
    stand for the real limits) and says so in one warning."""
    from mmrag.indexes.collection import Collection
    from mmrag.indexes.corpus import reader
    from mmrag.service.cli import main

    monkeypatch.setattr(reader, "MAX_TEXT_CHARS", 1_000)
    monkeypatch.setattr(reader, "MAX_TITLE_CHARS", 50)
    corpus = tmp_path / "mine.jsonl"
    long = {"id": "long", "title": "A" * 80, "text": "The wall is old. " * 200}
    rows = [{"id": "short", "text": "A short text."}, long, {**long, "id": "long2"}]
    corpus.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "index"
    args = ["index", "build", "--corpus", str(corpus), "--out", str(out)]
    assert main([*args, "--text-embedder", "none", "--quiet"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == [
        "mmrag: warning: 2 sources had a title over 50 or a text over 1,000 characters, cut to "
        f"that (the first: {corpus}:2: id 'long'); split long documents into passages, one "
        "source each"
    ]
    stored = Collection(out).store.find("long")
    assert (len(stored.title), len(stored.text)) == (50, 1_000)
    assert Collection(out).store.find("short").text == "A short text."
