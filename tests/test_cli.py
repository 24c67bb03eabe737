"""The `mmrag` command as a user runs it: a real subprocess, checked for one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import MMRAG, REPO, assert_one_line_error, run_mmrag


def test_build_prints_summary_and_search_prints_hits(tiny_webqa, tmp_path: Path):
    out = tmp_path / "idx"
    build = run_mmrag(
        "index",
        "build",
        "--corpus",
        str(tiny_webqa["json"]),
        "--images",
        str(tiny_webqa["tsv"]),
        "--out",
        str(out),
        "--quiet",
    )
    assert build.returncode == 0, build.stderr
    assert "indexed 5 sources (3 image, 2 text; 1 duplicates skipped)" in build.stdout
    search = run_mmrag(
        "search",
        "When was the Dunmore lighthouse built?",
        "--index",
        str(out),
        "--k",
        "3",
        "--json",
    )
    assert search.returncode == 0, search.stderr
    hits = json.loads(search.stdout)
    assert len(hits) == 3
    assert hits[0]["source_id"] == "s-light"
    assert set(hits[0]) == {"source_id", "modality", "score", "title", "text", "url", "ocr_text"}
    images = run_mmrag("search", "Dunmore", "--index", str(out), "--modality", "image", "--json")
    assert {h["modality"] for h in json.loads(images.stdout)} == {"image"}
    stats = run_mmrag("index", "stats", "--index", str(out), "--verify")
    assert json.loads(stats.stdout)["sources"] == {"total": 5, "image": 3, "text": 2}


def test_help_is_instant_and_lists_commands():
    result = run_mmrag("--help")
    assert result.returncode == 0
    for command in ("index", "search", "serve"):
        assert command in result.stdout


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (
            ["index", "build", "--corpus", "missing.json", "--out", "{tmp}/i"],
            ["missing.json", "no such file"],
        ),
        (["index", "build", "--corpus", "{broken}", "--out", "{tmp}/i"], ["malformed JSON"]),
        (
            ["index", "build", "--corpus", "{json}", "--out", "{tmp}/i", "--images", "nope.tsv"],
            ["nope.tsv"],
        ),
        (
            ["search", "q", "--index", "{index}", "--colour", "red"],
            ["unrecognized arguments: --colour"],
        ),
        (["search", "   ", "--index", "{index}"], ["question is empty"]),
        (["search", "q", "--index", "{tmp}/absent"], ["no such index directory"]),
        (["search", "q", "--index", "{old}"], ["format version 0", "rebuild"]),
        (["search", "q", "--index", "{index}", "--modality", "video"], ["invalid choice: 'video'"]),
        (["frobnicate"], ["invalid choice: 'frobnicate'"]),
    ],
)
def test_bad_input_is_one_line_no_traceback(tiny_webqa, tmp_path, args, fragments):
    from mmrag.indexes.collection import build_index

    index = tmp_path / "index"
    build_index([tiny_webqa["json"]], index)
    old = tmp_path / "old"
    build_index([tiny_webqa["json"]], old)
    manifest = json.loads((old / "manifest.json").read_text())
    (old / "manifest.json").write_text(json.dumps({**manifest, "format_version": 0}))
    broken = tmp_path / "broken.json"
    broken.write_text('{"q1": {"Q": "x", ')
    names = {
        "tmp": tmp_path,
        "index": index,
        "old": old,
        "broken": broken,
        "json": tiny_webqa["json"],
    }
    result = run_mmrag(*(arg.format(**names) for arg in args), cwd=tmp_path)
    assert_one_line_error(result, *fragments)


@pytest.mark.parametrize("command", [["search", "q"], ["ask", "q"], ["serve"]])
def test_flags_left_out_never_override_the_environment_or_the_config_file(
    command, tmp_path: Path, monkeypatch
):
    """Flags over MMRAG_* over the TOML file: an argparse default would override both."""
    from mmrag.core.options import settings_from
    from mmrag.service.cli import build_parser

    config = tmp_path / "mmrag.toml"
    config.write_text('fusion = "calibrated"\nmax_sources = 3\n')
    monkeypatch.setenv("MMRAG_FUSION", "rrf")
    args = build_parser().parse_args([*command, "--index", "x", "--config", str(config)])
    settings = settings_from(args)
    assert (settings.fusion, settings.max_sources) == ("rrf", 3)
    given = build_parser().parse_args([*command, "--index", "x", "--fusion", "raw"])
    assert settings_from(given).fusion == "raw"


def test_image_flags_read_only_regular_files_up_to_the_upload_limit(tmp_path: Path):
    """`--image /dev/zero` was read until the kernel killed the process at 23 GB, and a FIFO
    hung `ask` and `ground`; each of the three commands reads its image through one check."""
    fifo = tmp_path / "pipe.jpg"
    os.mkfifo(fifo)
    big = tmp_path / "big.jpg"
    with big.open("wb") as handle:
        handle.truncate(8_000_001)  # one byte past max_body_bytes, the service's upload limit
    cases = [
        (["ask", "q", "--index", "x", "--image", "/dev/zero"], "not a regular file"),
        (["rationale", "--question", "q", "--image", str(fifo)], "not a regular file"),
        (["ground", "--question", "q", "--image", str(big)], "larger than the 8,000,000 bytes"),
    ]
    for args, says in cases:
        assert_one_line_error(run_mmrag(*args), "--image", says)


def test_undecodable_text_binary_configs_and_image_folders_are_one_line(tiny_webqa, tmp_path):
    """Issue 30, finding 7: a question holding a byte that is not UTF-8 (`$'door \\xff inn'`)
    was a 44-line traceback from the tokenizer, a binary `--config` a UnicodeDecodeError, and
    `--image DIR` said "Is a directory: 3" without naming the path."""
    from mmrag.indexes.collection import build_index

    index = tmp_path / "index"
    build_index([tiny_webqa["json"]], index)
    question = os.fsdecode(b"door \xff inn")  # as the shell hands it over
    for command in ("ask", "search"):
        result = run_mmrag(command, question, "--index", str(index))
        assert_one_line_error(result, "question: byte 0xff at character 5 is not UTF-8")
    config = tmp_path / "mmrag.toml"
    config.write_bytes(bytes(range(256)))
    result = run_mmrag("search", "door", "--index", str(index), "--config", str(config))
    assert_one_line_error(result, f"{config}: not a TOML text file", "0x80")
    photos = tmp_path / "photos"
    photos.mkdir()
    result = run_mmrag("ask", "What is it?", "--index", str(index), "--image", str(photos))
    assert_one_line_error(result, f"--image {photos}: a directory")


def test_chat_tells_a_mistyped_command_or_an_undecodable_line_and_goes_on(tiny_webqa, tmp_path):
    """Issue 30, finding 7: `mmrag chat` answered an unknown `/command` as a question. A line
    that is not UTF-8 fails alone too, in a UTF-8 locale whose decoder refuses such bytes."""
    from mmrag.indexes.collection import build_index

    index = tmp_path / "index"
    build_index([tiny_webqa["json"]], index)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONIOENCODING": "utf-8:strict"}
    lines = b"/frobnicate now\n" + b"door \xff inn\n" + b"/quit\n"
    result = subprocess.run(
        [*MMRAG, "chat", "--index", str(index)],
        input=lines,
        capture_output=True,
        env=env,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    stderr = result.stderr.decode()
    assert result.returncode == 0 and "Traceback" not in stderr, stderr
    errors_said = [line for line in stderr.splitlines() if line.startswith("mmrag: error:")]
    assert len(errors_said) == 2, stderr
    assert "no command /frobnicate" in errors_said[0]
    assert "0xff" in errors_said[1] and "not UTF-8" in errors_said[1]
    assert result.stdout.decode().replace(">", "").strip() == ""  # nothing was asked
