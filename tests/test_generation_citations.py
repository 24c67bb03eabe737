"""Citation parsing and validation: pure functions, because small models do not obey."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from mmrag.generation.citations import (
    cite,
    first_sentence,
    marker_numbers,
    sentence_end,
    strip_markers,
)
from mmrag.generation.types import Citation


@dataclass(frozen=True)
class Src:
    id: str
    modality: str
    title: str = ""
    text: str = ""


SOURCES = [Src("s-light", "text"), Src("img-1", "image"), Src("s-town", "text")]


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("built in 1887 [1].", [1]),
        ("built in 1887 [1, 3].", [1, 3]),
        ("built in 1887 [1][2].", [1, 2]),
        ("red [2] and built in 1887 [1; 3]", [2, 1, 3]),
        ("red [Source 2] and [sources 1 and 3]", [2, 1, 3]),
        ("the year [1887] and [] and [a]", []),
    ],
)
def test_marker_numbers(text: str, numbers: list[int]) -> None:
    assert marker_numbers(text) == numbers


def test_valid_markers_become_citations_in_order() -> None:
    cited = cite("The door is red [2] and the inn was built in 1887 [1, 2].", SOURCES)
    assert cited.text == "The door is red [2] and the inn was built in 1887 [1][2]."
    assert cited.citations == [Citation(2, "img-1", "image"), Citation(1, "s-light", "text")]
    assert cited.text_without_markers == "The door is red and the inn was built in 1887."


def test_invented_numbers_are_dropped() -> None:
    cited = cite("It was built in 1887 [1, 7] by Dr. Smith [9].", SOURCES)
    assert cited.text == "It was built in 1887 [1] by Dr. Smith."
    assert [c.marker for c in cited.citations] == [1]


@pytest.mark.parametrize(
    "raw",
    [
        "The lighthouse was built in 1887.",
        "The lighthouse was built in 1887 [0].",
        "The lighthouse was built in 1887 [4].",
        "The lighthouse was built in 1887",
    ],
)
def test_invalid_or_missing_markers_are_dropped_and_nothing_is_cited_in_their_place(
    raw: str,
) -> None:
    """Which source supports the sentence is for the attribution step to decide, by checking;
    citing the top source blindly made invented facts look sourced."""
    cited = cite(raw, SOURCES)
    assert cited.text == "The lighthouse was built in 1887."
    assert cited.citations == []
    assert cited.text_without_markers == "The lighthouse was built in 1887."


def test_without_sources_nothing_is_cited() -> None:
    cited = cite("Nothing was found.", [])
    assert (cited.text, cited.citations) == ("Nothing was found.", [])


def test_rambling_is_cut_after_the_first_sentence_keeping_its_markers() -> None:
    raw = (
        "The flag of Wales shows a red dragon. [1] Wales (image caption) is a country. [2] "
        "The flag of Wales is [3] a dragon."
    )
    cited = cite(raw, SOURCES)
    assert cited.text == "The flag of Wales shows a red dragon [1]."
    assert cited.text_without_markers == "The flag of Wales shows a red dragon."


def test_markers_move_in_front_of_the_final_punctuation() -> None:
    assert cite("The boat is blue. [2][3]", SOURCES).text == "The boat is blue [2][3]."
    assert cite("[2] The boat is blue.", SOURCES).text == "The boat is blue [2]."
    assert cite("It costs 3.5 dollars[2] .", SOURCES).text == "It costs 3.5 dollars [2]."


def test_model_chatter_is_removed() -> None:
    cited = cite('Answer: "The boat is blue [2]"', SOURCES)
    assert cited.text == "The boat is blue [2]."
    assert cite("**Answer:** The boat is blue [2].", SOURCES).text == "The boat is blue [2]."


def test_empty_or_marker_only_output_gives_no_answer() -> None:
    for raw in ("", "   ", "[1].", "[2]"):
        cited = cite(raw, SOURCES)
        assert (cited.text, cited.citations) == ("", [])


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("Dr. Smith built it in St. Ives. It is tall.", "Dr. Smith built it in St. Ives."),
        ("The U.S. flag has 50 stars [2]. It was", "The U.S. flag has 50 stars [2]."),
        ("J. K. Rowling wrote it! Then more.", "J. K. Rowling wrote it!"),
        ("It is 3.5 m tall. More.", "It is 3.5 m tall."),
        ("It is red\nand more on a new line.", "It is red"),
        ('He said "stop." Then left.', 'He said "stop."'),
        ("One sentence only", "One sentence only"),
    ],
)  # fmt: skip
def test_first_sentence(text: str, sentence: str) -> None:
    assert first_sentence(text) == sentence


def test_sentence_end_waits_until_the_sentence_is_known_complete() -> None:
    """A streamed "…1887." may still get its marker; only the next sentence proves the end."""
    assert sentence_end("It was built in 1887.") is None
    assert sentence_end("It was built in 1887. [1]") is None
    text = "It was built in 1887. [1] It"
    assert text[: sentence_end(text)] == "It was built in 1887. [1]"
    assert sentence_end("It was built in approx. five years") is None
    assert sentence_end("Answer:\nIt was built in 1887") is None  # a label line is no sentence
    assert first_sentence("Answer:\nIt was built in 1887.\nMore.") == "It was built in 1887."


def test_strip_markers_tidies_spacing_and_punctuation() -> None:
    assert strip_markers("Red [1] , blue [2][3] and green ( [1] ).") == "Red, blue and green."
