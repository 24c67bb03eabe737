"""Every index file is checked against the manifest's digest at load: corruption is one line
naming the file, never a server that reports ready and then fails each search."""

from __future__ import annotations

import json
import os
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from mmrag.indexes.collection import Collection, build_index
from mmrag.indexes.encoders.base import EncoderInfo, l2_normalise
from mmrag.indexes.errors import IndexFormatError
from mmrag.indexes.manifest import MANIFEST_NAME
from mmrag.retrieval.calibration import Calibration
from tests.helpers import MMRAG, REPO, SAMPLE_JSON, assert_one_line_error, free_port, run_mmrag


class HashEncoder:
    """Vectors from a hash of the text: the dense files, not their quality, are under test."""

    info = EncoderInfo(kind="text", name="hash", backend="test", dim=8)

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        seeds = [zlib.crc32(text.encode()) for text in texts]
        return l2_normalise([np.random.default_rng(seed).normal(size=8) for seed in seeds])


def flip_byte(path: Path) -> bytes:
    """Invert one byte in the middle: same size, so only the digest can tell."""
    data = path.read_bytes()
    middle = len(data) // 2
    path.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    return data


def test_a_flipped_byte_in_any_file_fails_the_load_naming_it(tiny_webqa, tmp_path: Path):
    out = tmp_path / "idx"
    build_index([tiny_webqa["json"]], out, text_embedder=HashEncoder())
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.name != MANIFEST_NAME)
    names = {p.relative_to(out).as_posix() for p in files}
    assert {"sources/sources.jsonl", "dense/text-text/index.faiss"} <= names
    assert any(name.startswith("bm25/") for name in names)
    for path in files:
        name = path.relative_to(out).as_posix()
        original = flip_byte(path)
        with pytest.raises(IndexFormatError) as caught:
            Collection(out)
        assert str(caught.value) == f"{out}: {name} fails its checksum (corrupt); rebuild the index"
        path.write_bytes(original)
    Collection(out)


def test_serve_refuses_a_corrupt_faiss_file_in_one_line(tiny_webqa, tmp_path: Path):
    out = tmp_path / "idx"
    build_index([tiny_webqa["json"]], out, text_embedder=HashEncoder())
    flip_byte(out / "dense" / "text-text" / "index.faiss")
    command = [*MMRAG, "serve", "--index", str(out), "--port", str(free_port())]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert_one_line_error(
        result, "dense/text-text/index.faiss fails its checksum (corrupt); rebuild the index"
    )


def calibrate(index: Path) -> subprocess.CompletedProcess[str]:
    return run_mmrag(
        "retrieval", "calibrate", "--index", str(index), "--questions", str(SAMPLE_JSON),
        "--split", "all",
    )  # fmt: skip


@pytest.fixture
def calibrated(tmp_path: Path) -> Path:
    out = tmp_path / "idx"
    build_index([SAMPLE_JSON], out)
    result = calibrate(out)
    assert result.returncode == 0, result.stderr
    return out


def test_calibration_is_listed_and_checked(calibrated: Path):
    manifest = json.loads((calibrated / MANIFEST_NAME).read_text())
    listed = manifest["calibration"]["files"]["calibration.json"]
    assert listed["bytes"] == (calibrated / "calibration.json").stat().st_size
    Collection(calibrated)
    flip_byte(calibrated / "calibration.json")
    search = run_mmrag("search", "Dunmore", "--index", str(calibrated))
    assert_one_line_error(
        search, "calibration.json fails its checksum", "rerun `mmrag retrieval calibrate`"
    )
    again = calibrate(calibrated)  # the one command that repairs it must not be locked out
    assert again.returncode == 0, again.stderr
    assert "discarded the old calibration" in again.stderr
    Collection(calibrated)


def test_an_unlisted_calibration_is_refused_until_recalibrated(tmp_path: Path):
    out = tmp_path / "idx"
    build_index([SAMPLE_JSON], out)
    Calibration(curves={"bm25/text": (1.0, 0.0)}).save(out)  # a run killed before the manifest
    with pytest.raises(IndexFormatError, match=r"calibration\.json is not in the manifest"):
        Collection(out)
    result = calibrate(out)
    assert result.returncode == 0, result.stderr
    assert Collection(out).manifest["calibration"]
