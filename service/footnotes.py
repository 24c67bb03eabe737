"""The sources of an answer as footnotes in its text, for chat clients that show text only.

A plain-text OpenAI client (Simon Willison's `llm` CLI, a terminal chat) prints a message's
content and drops every other field, so `citations` and `sources` never reach its user: a bare
`[1]` names nothing to check. The chat route therefore appends the cited sources after the
checked answer, the way chat clients show footnotes:

    The door of the Harbor Inn is blue [1].

    Sources:
    [1] Harbor Inn — https://commons.wikimedia.org/wiki/File:Blue_door_of_the_Harbor_Inn.jpg

Each cited source is one line: its marker, its title and its page (an image without one gets
this service's URL of its bytes). Sent back as an earlier turn of the conversation, the block
is taken off again, so follow-ups are read from the answer alone.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin

from mmrag.service.schemas import AnswerResponse

HEADING = "\n\nSources:\n"
_FOOTNOTE = re.compile(r"\[\d+\] [^\n]*")


def footnotes(answered: AnswerResponse, base_url: str) -> str:
    """The block to append to `answered.answer`: one line per cited source in marker order,
    or "" when nothing is cited (a decline, a failed generation)."""
    lines = []
    for marker in sorted({citation.marker for citation in answered.citations}):
        source = answered.sources[marker - 1]
        link = source.url or (urljoin(base_url, source.image_url) if source.image_url else "")
        title = " ".join(source.title.split()) or source.source_id
        lines.append(f"[{marker}] {title}" + (f" — {' '.join(link.split())}" if link else ""))
    return HEADING + "\n".join(lines) if lines else ""


def without_footnotes(text: str) -> str:
    """An earlier answer as it was before `footnotes` were appended to it (other text as is)."""
    answer, heading, block = text.rpartition(HEADING)
    if heading and all(_FOOTNOTE.fullmatch(line) for line in block.strip().split("\n")):
        return answer
    return text
