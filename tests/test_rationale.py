"""`mmrag rationale` on an A-OKVQA-format item with the embedded models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmrag.indexes.images import WebQAImageStore
from tests.helpers import SAMPLE, assert_one_line_error, run_mmrag

CHOICES = ["red", "blue", "green", "yellow"]


@pytest.fixture(scope="module")
def door_image(tmp_path_factory) -> Path:
    """A sample image (the Harbor Inn's blue door) saved as a file, as COCO images are."""
    path = tmp_path_factory.mktemp("aokvqa") / "000000030006.jpg"
    path.write_bytes(WebQAImageStore(SAMPLE / "imgs.tsv").read_bytes("30000006"))
    return path


def test_rationale_then_direct_answer_then_a_choice(door_image: Path, hybrid_index: Path):
    result = run_mmrag(
        "rationale", "--image", str(door_image), "--question", "What color is the door?",
        "--caption", "A wooden door painted blue at the Harbor Inn.", "--choices", *CHOICES,
        "--index", str(hybrid_index), "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["rationale"].strip() and body["direct_answer"].strip()
    assert body["multiple_choice"] in CHOICES
    assert set(body["choice_scores"]) == set(CHOICES)


def test_text_output_without_choices(door_image: Path):
    result = run_mmrag(
        "rationale",
        "--image",
        str(door_image),
        "--question",
        "What is this?",
        "--caption",
        "A door.",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("rationale: ") and lines[1].startswith("direct answer: ")
    assert not any(line.startswith("multiple choice") for line in lines)


def test_bad_images_are_one_line_errors(tmp_path: Path):
    assert_one_line_error(
        run_mmrag("rationale", "--image", str(tmp_path / "none.jpg"), "--question", "q"),
        "none.jpg: no such image file",
    )
    text = tmp_path / "notes.jpg"
    text.write_text("not a picture")
    assert_one_line_error(
        run_mmrag("rationale", "--image", str(text), "--question", "q"), "undecodable image"
    )


def test_27_choices_are_one_line_before_any_model_loads(door_image: Path):
    many = [f"option {n}" for n in range(27)]
    result = run_mmrag(
        "rationale", "--image", str(door_image), "--question", "Which?", "--choices", *many,
        "--choose", "likelihood", "--engine", "openai", "--base-url", "http://127.0.0.1:9/v1",
    )  # fmt: skip
    # No server listens at port 9: a model call would have been a different error.
    assert_one_line_error(result, "--choices: at most 26 choices (A to Z), got 27")
