"""The chat page draws the region a cited image supports the answer with: a real `mmrag serve`
with a tiny random OWLv2 (`--detector`), driven by Debian's Chromium (see test_chat_page.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import running_mmrag_server
from tests.test_chat_page import IMAGE_QUESTION, ask, browser, open_page

__all__ = ["browser", "open_page"]  # the page fixtures, here served with a detector


@pytest.fixture(scope="module")
def server(
    hybrid_index: Path, tiny_owlv2: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    log = tmp_path_factory.mktemp("chat-page-regions") / "uvicorn.log"
    with running_mmrag_server(hybrid_index, log, "--detector", str(tiny_owlv2)) as base:
        yield base


def test_a_cited_image_shows_its_region_inside_the_thumbnail(open_page):
    page = open_page()
    page.select_option("#modality", "image")
    answer = ask(page, IMAGE_QUESTION)
    assert answer.get_attribute("data-state") == "done", answer.inner_text()
    card = answer.locator(".card.grounded").first
    region = card.locator(".region")
    region.wait_for(state="visible")
    assert "Region that supports the answer" in region.get_attribute("aria-label")
    thumb, mark = card.locator("img.thumb").bounding_box(), region.bounding_box()
    assert mark["width"] >= 1 and mark["height"] >= 1
    assert (
        thumb["x"] - 0.5 <= mark["x"]
        and mark["x"] + mark["width"] <= thumb["x"] + thumb["width"] + 0.5
    )
    assert (
        thumb["y"] - 0.5 <= mark["y"]
        and mark["y"] + mark["height"] <= thumb["y"] + thumb["height"] + 0.5
    )
    # Only cited image cards are boxed.
    assert answer.locator(".card.uncited .region").count() == 0
