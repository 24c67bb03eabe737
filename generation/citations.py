"""Citation markers in model output: parse, validate against the given sources, tidy.

Pure functions, because small models do not obey formatting instructions (SmolLM2-135M
sometimes invents [7] for two sources, and rambles past its first sentence): whatever the model
wrote, the sentence that leaves here is one sentence whose every [n] names one of the n
sources. Whether those sources support it is checked next (`generation.verification`), and nothing
here cites a source on the model's behalf.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from mmrag.generation.types import Citation, SourceLike

# [1], [1, 2], [1;2], [1 and 2], [Source 1]. Two digits at most: "[1887]" is a year, not a marker.
_NUMBER = r"(?:sources?\s*)?\d{1,2}"
MARKER = re.compile(rf"\[\s*({_NUMBER}(?:\s*(?:,|;|and|&)\s*{_NUMBER})*)\s*\]", re.IGNORECASE)
_RUN = re.compile(rf"(?:\s*{MARKER.pattern})+", re.IGNORECASE)
_CANONICAL_RUN = re.compile(r"(?:\s*\[\d+\])+")
_CLOSERS = "\"')”’"
_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "st", "mt", "jr", "sr", "vs", "etc", "inc", "ltd", "co", "ft",
    "approx", "ca", "prof", "gen", "col", "lt", "sgt", "rev", "fig", "vol", "jan", "feb", "mar",
    "apr", "aug", "sept", "sep", "oct", "nov", "dec",
}  # fmt: skip
_LABEL = re.compile(r"^\s*(?:\*\*)?(?:final answer|answer|a)\s*:\s*(?:\*\*)?\s*", re.IGNORECASE)


@dataclass(frozen=True)
class CitedText:
    text: str
    text_without_markers: str
    citations: list[Citation]


def marker_numbers(text: str) -> list[int]:
    """Every number cited, in order of appearance, repeats included."""
    return [int(n) for group in MARKER.findall(text) for n in re.findall(r"\d+", group)]


def is_abbreviation(text: str, dot: int) -> bool:
    """A period after "Dr", "St", an initial ("J.") or an acronym ("U.S.") ends no sentence."""
    if text[dot] != ".":
        return False
    word = re.search(r"[A-Za-z.]*$", text[:dot]).group()
    token = word.lstrip(".").lower()
    return len(token) == 1 or "." in token or token in _ABBREVIATIONS


def _line_end(text: str) -> int:
    """The first line break after some content; a label line such as "Answer:" does not count."""
    start = 0
    while (newline := text.find("\n", start)) != -1:
        line = text[:newline].strip()
        if re.search(r"\w", line) and not line.endswith(":"):
            return newline
        start = newline + 1
    return -1


def sentence_end(text: str) -> int | None:
    """Where the first sentence ends, markers after its final punctuation included.

    Only a sentence known to be complete counts: its punctuation must be followed by the start
    of another sentence or a line break. At the end of the text, more may come (streaming), so
    the answer is None.
    """
    newline = _line_end(text)
    for match in re.finditer(r"[.!?]", text):
        if newline != -1 and match.start() > newline:
            break
        if is_abbreviation(text, match.start()):
            continue
        end = match.end()
        while end < len(text) and text[end] in ".!?" + _CLOSERS:
            end += 1
        run = _RUN.match(text, end)
        if run:  # markers after the punctuation ("red. [1]."), and a stop after them
            end = run.end()
            while end < len(text) and text[end] in ".!?":
                end += 1
        rest = text[end:]
        if rest.lstrip().startswith("[") and "]" not in rest:
            return None  # a marker is still being written
        if rest[:1].isspace() and rest.strip():
            following = rest.lstrip()[0]
            if "\n" in rest[: len(rest) - len(rest.lstrip())] or not following.islower():
                return end
    return newline if newline != -1 else None


def clean(raw: str) -> str:
    """Model chatter around the answer: an "Answer:" label, wrapping quotes, bold markers."""
    text = _LABEL.sub("", raw.strip().replace("**", ""))
    if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    return text.strip()


def first_sentence(raw: str) -> str:
    text = clean(raw)
    end = sentence_end(text)
    return " ".join((text if end is None else text[:end]).split())


def strip_markers(text: str) -> str:
    """The sentence as WebQA's fluency and accuracy metrics should see it: no markers."""
    text = MARKER.sub(" ", text)
    text = re.sub(r"\(\s*\)|\[\s*\]", " ", text)
    text = re.sub(r"\s+([.,;:!?)])", r"\1", " ".join(text.split()))
    return text.strip()


def _canonical_markers(text: str, count: int) -> str:
    """Each marker group rewritten as [a][b] with only numbers 1..count, repeats dropped."""

    def rewrite(group: re.Match[str]) -> str:
        numbers = dict.fromkeys(int(n) for n in re.findall(r"\d+", group.group(1)))
        return "".join(f"[{n}]" for n in numbers if 1 <= n <= count)

    return MARKER.sub(rewrite, text)


def _place_markers(text: str) -> str:
    """Markers in front of the final punctuation, one space before each run, none after."""
    # "red. [1][3]." (markers between two stops, as constrained decoding writes them)
    text = re.sub(r"[.!?]+(\s*(?:\[\d+\])+\s*[.!?]+)\s*$", r"\1", text)
    lead = _CANONICAL_RUN.match(text)
    moved = ""
    if lead and lead.group().strip():
        moved, text = lead.group().strip(), text[lead.end() :]
    body = re.match(rf"^(.*?)((?:[.!?]+[{_CLOSERS}]*)?)((?:\s*\[\d+\])*)\s*$", text, re.DOTALL)
    sentence, punctuation, trailing = body.group(1), body.group(2), body.group(3)
    # A run before the punctuation stays where the model put it; others join the end.
    tail_run = re.search(r"((?:\s*\[\d+\])+)\s*$", sentence)
    if tail_run:
        sentence, moved = sentence[: tail_run.start()], tail_run.group() + moved
    markers = "".join(f"[{n}]" for n in dict.fromkeys(marker_numbers(moved + trailing)))
    sentence = re.sub(r"\s*((?:\[\d+\])+)", r" \1", sentence)
    sentence = " ".join(sentence.split()).rstrip(" ,;:")
    result = f"{sentence} {markers}".strip() if markers else sentence
    return result + (punctuation.strip() or ("." if result else ""))


def cite(raw: str, sources: Sequence[SourceLike]) -> CitedText:
    """The model's raw output as one sentence over `sources` (numbered from 1), keeping the
    citations the model wrote whose numbers name a given source.

    Invalid or invented numbers are dropped. Nothing is cited on the model's behalf here:
    whether a source supports the sentence is for `generation.verification.attribution` to decide.
    """
    sentence = _canonical_markers(first_sentence(raw), len(sources))
    if not strip_markers(sentence).strip(".!?"):  # nothing but markers or punctuation
        return CitedText(text="", text_without_markers="", citations=[])
    text = _place_markers(sentence)
    citations = [
        Citation(marker=n, source_id=sources[n - 1].id, modality=sources[n - 1].modality)
        for n in dict.fromkeys(marker_numbers(text))
    ]
    return CitedText(text=text, text_without_markers=strip_markers(text), citations=citations)


def cite_sentence(sentence: str, markers: Sequence[int]) -> str:
    """A marker-free sentence with these markers placed before its final punctuation."""
    return _place_markers(strip_markers(sentence) + "".join(f"[{n}]" for n in markers))


MAX_CONSTRAINED_SOURCES = 9  # markers are one digit in the grammar


# Words whose period ends no sentence ("St. Wenna", "J. K. Rowling"): the grammar lets a period
# follow them, with a space, inside the sentence.
_GRAMMAR_ABBREVIATIONS = ("St", "Mt", "Dr", "Mr", "Mrs", "Ms", "Jr", "Sr", "Ft", "Prof", "Rev")


@dataclass(frozen=True)
class CitationFormat:
    """The answer's shape, for engines that can constrain decoding to it: one sentence, then
    one or two markers naming given sources, then a full stop. The model then writes its own
    citations instead of leaving them to be guessed.

    Inside the sentence a period must be part of a number or an abbreviation ("3.5", "U.S",
    "St. Wenna"); at its end it may come before the markers, and then the model, unable to
    stop, goes on with " [n]." (the markers are moved before the full stop afterwards). A
    grammar without that final period let SmolLM2 wander into ".1.1.1..." instead of citing.
    The sentence has at least three words, one space apart (so that the grammar is unambiguous,
    which keeps llama.cpp's grammar sampling fast): with one allowed, SmolLM2 answered "The [1]."
    """

    sources: int

    def _digits(self) -> str:
        return f"1-{self.sources}" if self.sources > 1 else "1"

    def gbnf(self) -> str:
        """For llama.cpp (in process, and its server's `grammar` field)."""
        abbreviations = " | ".join(f'"{word}"' for word in _GRAMMAR_ABBREVIATIONS)
        return "\n".join(
            [
                'root ::= first char* " " word " " word (" " word)* "."? " " cite cite? "."',
                "first ::= [A-Za-z0-9\"'(]",
                "word ::= char+",
                r"char ::= [^\[\]\n.!? ] | [.] [0-9A-Za-z] | abbreviation",
                f'abbreviation ::= ({abbreviations} | [A-Z]) ". " [A-Z]',
                rf'cite ::= "[" [{self._digits()}] "]"',
            ]
        )

    def regex(self) -> str:
        """For vLLM's guided decoding (`structured_outputs.regex`, formerly `guided_regex`)."""
        cite = rf"\[[{self._digits()}]\]"
        abbreviation = rf"(?:{'|'.join(_GRAMMAR_ABBREVIATIONS)}|[A-Z])\. [A-Z]"
        char = rf"(?:[^\[\]\n.!? ]|\.[0-9A-Za-z]|{abbreviation})"
        sentence = rf"[A-Za-z0-9\"'(]{char}*(?: {char}+){{2,}}"
        return rf"{sentence}\.? (?:{cite}){{1,2}}\."


def citation_format(sources: int) -> CitationFormat | None:
    """The constraint for this many sources, or None where the grammar cannot say them."""
    return CitationFormat(sources) if 1 <= sources <= MAX_CONSTRAINED_SOURCES else None
