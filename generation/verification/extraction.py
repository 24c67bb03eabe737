"""The source's own sentence that answers a question, as a full sentence: what an answer falls
back to when no source supports the model's.

For a typed question ("Who built …", "How many …") the first sentence, in source order, that
`answers_the_question`; for a yes/no question the first that gives a verdict, after it ("No,
the purple sign …"); for an open request ("Tell me about …", "Describe …") the sentence about
its topic that says most. Captions are often noun phrases ("The Kestrel Point Lighthouse in
Salt Hollow, painted white"): an answer is a full sentence, so a caption without a finite verb
is said of its photo ("The photo shows the Kestrel Point Lighthouse …"), and any other
fragment is not an answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from mmrag.generation.citations import first_sentence
from mmrag.generation.reading.text import (
    STEM,
    STOPWORDS,
    attribute,
    read,
    sentences,
    terms,
)
from mmrag.generation.types import SourceLike
from mmrag.generation.verification.questions import (
    answers_the_question,
    asks_appearance,
    asks_open,
    asks_place,
    asks_yes_no,
    topic,
    yes_no_verdict,
)
from mmrag.generation.verification.verifier import evidence_text

SHOWN = "The photo shows"
SIGN_CHARS = 120  # text read in an image up to this long is one answer, longer a line at a time


def extract(question: str, sources: Sequence[SourceLike]) -> tuple[str, int] | None:
    """The answering sentence and the number of the source ([n]) it comes from, or None: one
    that says the kind a "which" question asks for ("the River Dun" for "Which river …?")
    before one that only names a thing of it ("Mill Lane" for "Which street …?")."""
    if asks_yes_no(question):
        return _verdict(question, sources)
    thing = topic(question) if asks_open(question) else None
    appearance = thing is not None and asks_appearance(question)
    sayable = list(_sayable(sources))  # read once, for every pass
    # A place's name before any other place: "stands on Mill Lane", not "served travellers on
    # the old coast road", for "Where in Greywick is the Crown Inn?".
    for place_named in (True, False) if asks_place(question) else (False,):
        for kind_named, exact in ((True, True), (True, False), (False, False)):
            found = _extract(
                question,
                sayable,
                thing,
                appearance,
                kind_named=kind_named,
                exact=exact,
                place_named=place_named,
            )
            if found is not None:
                return found
    return None


class _Sayable(NamedTuple):
    number: int  # the source's, as cited ([n])
    source: SourceLike
    context: str  # all its text (`evidence_text`): its title may name what the sentence does not
    sentence: str  # as found
    kind: str  # where it was found: "text", "ocr" or "title"
    said: str  # as a full sentence


def _sayable(sources: Sequence[SourceLike]) -> Iterator[_Sayable]:
    """Each source sentence that can be said as a full sentence, in source order."""
    for number, source in enumerate(sources, 1):
        context = evidence_text(source)
        for sentence, kind in _sentences_title_last(source):
            said = full_sentence(first_sentence(sentence), source, kind)
            if said is not None:
                yield _Sayable(number, source, context, sentence, kind, said)


def _verdict(question: str, sources: Sequence[SourceLike]) -> tuple[str, int] | None:
    """A yes/no question's answer: the first sentence that gives a verdict, after it."""
    for one in _sayable(sources):
        if verdict := yes_no_verdict(question, one.sentence, one.context):
            return f"{verdict.capitalize()}, {_lower_article(one.said)}", one.number
    return None


def _extract(
    question: str,
    sayable: Sequence[_Sayable],
    thing: str | None,
    appearance: bool,
    *,
    kind_named: bool,
    exact: bool,
    place_named: bool,
) -> tuple[str, int] | None:
    """The first sentence that answers a typed question; for an open request about `thing`,
    the one about it that a reader says first."""
    found: list[tuple[bool, bool, int, int, str, int]] = []  # (not about, not first, -new, …)
    for one in sayable:
        if not answers_the_question(
            question,
            one.sentence,
            one.context,
            kind_named=kind_named,
            exact=exact,
            place_named=place_named,
        ):
            continue
        if thing is None:
            return one.said, one.number
        new = terms(one.sentence).words - terms(question).words
        # What a reader says first: what the thing looks like when that is asked (the photo's
        # caption, about what its title names), else what it is ("The Harbor Inn is an inn in
        # Dunmore …").
        captioned = one.source.modality == "image" and one.kind == "text"
        about = _about(thing, one.sentence) or (captioned and _about(thing, one.source.title))
        first = captioned if appearance else _defines(one.sentence)
        found.append((not about, not first, -len(new), len(found), one.said, one.number))
    if found:
        *_, said, number = min(found)
        return said, number
    return None


def read_in_image(text: str) -> str:
    """Text read in an image, as a full sentence that says where it was read."""
    return f'The text in the image reads "{text.strip()}".'


def _about(thing: str, sentence: str) -> bool:
    """Whether a sentence is about a thing: its subject is the thing ("The Harbor Inn is an
    inn in Dunmore, built in 1888 …" is about the Harbor Inn; "Visitors can climb 194 steps
    to the top of the Aldric Tower" is about visitors, "The upper floor of the Harbor Inn"
    about a floor)."""
    wanted = read(thing)
    heads = {STEM(word.lemma) for word in wanted.words if word.dep == "ROOT"}
    reading = read(sentence)
    for subject in reading.subjects():
        named = {STEM(word.lemma) for word in reading.subtree(subject.i)}
        if STEM(subject.lemma) in heads and terms(thing).words <= named:
            return True
    return False


def _defines(sentence: str) -> bool:
    """ "X is a 48-metre tower …": a sentence saying what its subject is."""
    reading = read(sentence)
    roots = [word for word in reading.words if word.dep == "ROOT" and word.lemma == "be"]
    return any(c.dep == "attr" for root in roots for c in reading.children(root.i))


def full_sentence(sentence: str, source: SourceLike, kind: str = "text") -> str | None:
    """The sentence; a caption's noun phrase said of its photo, and a line read in the image
    said to be read there; None for other fragments."""
    if kind == "ocr":
        return read_in_image(sentence.rstrip("."))
    image = source.modality == "image"
    if read(sentence).finite(past=not image):
        return sentence
    if not image or not sentence:
        return None
    said, first = _lower_article(sentence), read(sentence).words[0]
    if first.pos == "NOUN" and not first.proper:  # a title's "Pond in Willow Gardens"
        said = f"the {said}"
    return f"{SHOWN} {said}"


def _sentences_title_last(source: SourceLike) -> list[tuple[str, str]]:
    """A source's sentences to answer from, each with where it comes from ("text", "ocr",
    "title"): its caption or snippet says more than its title ("Blue Door of the Harbor
    Inn"), which comes last. Text read in an image is cut at its lines, where a sign's text
    breaks: read as one sentence, a page of it with no full stop was "extracted" whole as an
    80 KB answer."""
    ocr_text = getattr(source, "ocr_text", None) or ""
    lines = [line.text for line in getattr(source, "ocr", ())] or [ocr_text]
    if len(ocr_text) <= SIGN_CHARS:  # a sign's few lines read as one ("NO ENTRY / EXCEPT BUSES")
        lines = [ocr_text]
    said = [(source.text, "text"), *((line, "ocr") for line in lines), (source.title, "title")]
    title = re.sub(r"\s*\([^)]*\)$", "", source.title or "")  # "Sea Lark (boat)"
    if title and f"the {title}".lower() in source.text.lower():  # "the Dunmore Harbor Festival"
        title = f"The {title}"
    return [
        (_named(sentence, title), kind)
        for part, kind in said
        if part
        for sentence in sentences(part)
    ]


_REFERRING = {"It": "", "She": "", "He": "", "Its": "’s", "Her": "’s", "His": "’s"}


def _named(sentence: str, title: str) -> str:
    """A sentence that opens with "It", "Its", "She" (a boat) or "He", with the source's title
    in its place: out of its snippet, "It has a population of 5,903" says nothing of Dunmore,
    "She was built at Dunmore" nothing of the Sea Lark."""
    words = read(sentence).words
    if not title or not words or words[0].text not in _REFERRING:
        return sentence
    if words[0].text == "Her" and words[0].dep != "poss":
        return sentence
    return f"{title}{_REFERRING[words[0].text]}{sentence[words[0].end :]}"


def _lower_article(sentence: str) -> str:
    """To follow "Yes, " or "The photo shows": "The sign ..." -> "the sign ...", "Six ducks"
    -> "six ducks"; names keep their capitals."""
    words = read(sentence).words
    if not words:
        return sentence
    first = words[0]
    lower = first.text.lower()
    plain = lower in STOPWORDS or first.number is not None or attribute(lower)
    plain = plain or (first.pos in ("NOUN", "ADJ", "DET", "NUM") and not first.proper)
    return f"{lower}{sentence[first.end :]}" if plain else sentence
