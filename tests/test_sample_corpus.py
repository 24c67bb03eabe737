"""The committed sample corpus: exactly what its script makes, in the real release format."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from mmrag.indexes.corpus import CorpusStats, read_corpus
from mmrag.indexes.corpus.webqa import QCATES
from mmrag.indexes.images import WebQAImageStore, decode_image
from tests.helpers import REPO, SAMPLE, SAMPLE_JSON

FILES = ("WebQA_sample.json", "imgs.tsv", "imgs.lineidx")


def test_committed_sample_is_what_the_script_makes(tmp_path: Path):
    subprocess.run(
        [sys.executable, str(REPO / "data" / "make_sample.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    for name in FILES:
        assert (tmp_path / name).read_bytes() == (SAMPLE / name).read_bytes(), name


def test_sample_covers_every_category_with_gold_and_distractors(sample_questions):
    assert len(sample_questions) >= 40
    assert set(Counter(q.qcate for q in sample_questions)) == set(QCATES)
    for question in sample_questions:
        assert question.pos_sources and question.neg_sources, question.guid
        assert question.answers and question.keywords, question.guid
        assert question.is_image_query == (question.qcate != "text"), question.guid


def test_sample_has_enough_sources_and_every_image_decodes():
    stats = CorpusStats()
    sources = list(read_corpus([SAMPLE_JSON], stats))
    assert stats.total >= 300
    assert stats.by_modality["image"] >= 100 and stats.by_modality["text"] >= 150
    store = WebQAImageStore(SAMPLE / "imgs.tsv")
    for source in sources:
        if source.modality == "image":
            assert min(decode_image(store.read_bytes(source.image_ref)).size) >= 64


def test_sample_is_small():
    assert sum((SAMPLE / name).stat().st_size for name in FILES) < 5_000_000
