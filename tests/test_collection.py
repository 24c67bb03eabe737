"""Index directories: atomic builds, manifests that refuse what they cannot vouch for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmrag.indexes.atomic import atomic_write_text
from mmrag.indexes.collection import Collection, build_index
from mmrag.indexes.errors import IndexFormatError
from mmrag.retrieval.hybrid import HybridRetriever


def test_build_then_search_by_modality(tiny_webqa, tmp_path: Path):
    report = build_index([tiny_webqa["json"]], tmp_path / "idx", images=tiny_webqa["tsv"])
    assert report.sources == {"image": 3, "text": 2}
    assert "indexed 5 sources" in report.summary()
    retriever = HybridRetriever(Collection(tmp_path / "idx"))
    assert (retriever.retrievers, retriever.fusion) == (["bm25"], "raw")
    merged = retriever.search("color of the Harbor Inn door", k=5)
    assert merged[0].source.id == "30000000"
    texts = retriever.search("Harbor Inn door lighthouse", k=5, modality="text")
    assert texts and all(c.source.modality == "text" for c in texts)
    assert retriever.search("Dunmore lighthouse", k=2, modality="text")[0].source.id == "s-light"
    images = retriever.search("Dunmore lighthouse", k=2, modality="image")
    assert images and all(c.source.modality == "image" for c in images)


def test_store_finds_sources_by_id_and_images_by_reference(tiny_webqa, tmp_path: Path):
    build_index([tiny_webqa["json"]], tmp_path / "idx", images=tiny_webqa["tsv"])
    collection = Collection(tmp_path / "idx")
    assert collection.store.find("s-light").title == "Dunmore lighthouse"
    assert collection.store.find("nope") is None
    source = collection.store.find("30000001")
    assert collection.images.read_bytes(source.image_ref)[:2] == b"\xff\xd8"


def test_a_crash_mid_build_keeps_the_old_index_and_leaves_no_debris(tiny_webqa, tmp_path: Path):
    out = tmp_path / "idx"
    build_index([tiny_webqa["json"]], out)
    before = (out / "manifest.json").read_text()

    def crash_after_two(sources):
        for n, source in enumerate(sources):
            if n == 2:
                raise RuntimeError("power cut")
            yield source

    with pytest.raises(RuntimeError, match="power cut"):
        build_index([tiny_webqa["json"]], out, progress=crash_after_two)
    assert (out / "manifest.json").read_text() == before
    assert Collection(out).store.find("s-light") is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["idx", "WebQA_tiny.json", "imgs.tsv", "imgs.lineidx"]
    )


def test_a_crash_on_first_build_leaves_nothing_loadable(tiny_webqa, tmp_path: Path):
    def crash(sources):
        raise RuntimeError("killed")
        yield from sources

    with pytest.raises(RuntimeError):
        build_index([tiny_webqa["json"]], tmp_path / "idx", progress=crash)
    with pytest.raises(IndexFormatError, match="no such index directory"):
        Collection(tmp_path / "idx")


def test_incompatible_format_version_is_refused(tiny_webqa, tmp_path: Path):
    out = tmp_path / "idx"
    build_index([tiny_webqa["json"]], out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["format_version"] = 99
    atomic_write_text(out / "manifest.json", json.dumps(manifest))
    with pytest.raises(
        IndexFormatError, match="format version 99, this mmrag reads version 2; rebuild it"
    ):
        Collection(out)


def test_truncated_and_corrupted_files_are_detected(tiny_webqa, tmp_path: Path):
    out = tmp_path / "idx"
    build_index([tiny_webqa["json"]], out)
    records = out / "sources" / "sources.jsonl"
    data = records.read_bytes()
    records.write_bytes(data[:-5])
    with pytest.raises(IndexFormatError, match=r"sources\.jsonl has the wrong size"):
        Collection(out)
    records.write_bytes(data.replace(b"Dunmore", b"Dunm0re"))
    Collection(out, verify=False)  # same size: only the checksum can tell, and every load asks
    with pytest.raises(IndexFormatError, match=r"sources\.jsonl fails its checksum"):
        Collection(out)


def test_a_directory_without_manifest_is_not_an_index(tmp_path: Path):
    (tmp_path / "half").mkdir()
    with pytest.raises(IndexFormatError, match="not an mmrag index"):
        Collection(tmp_path / "half")


def test_atomic_write_replaces_whole_files(tmp_path: Path):
    target = tmp_path / "out.json"
    atomic_write_text(target, "first")
    atomic_write_text(target, "second")
    assert target.read_text() == "second"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]
