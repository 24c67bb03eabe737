"""Every statement of a source, as a reader takes it: each a candidate answer, sayable as a full
sentence and citable.

A source says things in many shapes, and a reader takes each of them as a statement about
something: a pronoun-led sentence ("Its roof was relaid in Welsh slate in 1931.") about what
its source or an earlier sentence names, a verbless line (a label's "Lent by the Hollin Trust,
2003.", a timetable's "First departure 06:50, last 22:10", a caption's "Four red kayaks on the
shore at Bream Cove") or an instruction ("Simmer for 40 minutes with the lid on.") about what
its source's title names. So each sentence and line becomes a `Statement` that says what it is
`about` and how it is said as a full sentence: a full sentence as written, its opening pronoun
replaced by the name it stands for; a caption said of its photo ("The photo shows four red
kayaks …"); a line read in an image said to be read there; any other line quoted from its
source (`The source “Beef stew” says: “Simmer for 40 minutes with the lid on.”`), which adds
no word of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from mmrag.generation.citations import first_sentence
from mmrag.generation.reading.text import STOPWORDS, SUBJECTS, Reading, attribute, read, sentences
from mmrag.generation.reading.words import (
    AT_A_PLACE,
    FIRST_PERSON,
    PERSON_PRONOUNS,
    THING_PRONOUNS,
)
from mmrag.generation.types import SourceLike

SHOWN = "The photo shows"
# A numbered list's item number: "1. Harwick Mill - free, closed Tuesdays." is one item.
ITEM_NUMBER = re.compile(r"^\s*\d{1,2}[.)]\s+")
SIGN_CHARS = 120  # text read in an image up to this long is one answer, longer a line at a time


def evidence_text(source: SourceLike) -> str:
    """All a source says: its title, its caption or snippet, and any text read in its image."""
    parts = [source.title, source.text, getattr(source, "ocr_text", None) or ""]
    return ". ".join(part.rstrip(". ") for part in parts if part)


@dataclass(frozen=True)
class Statement:
    """One sentence or line of a source, as a candidate answer."""

    number: int  # the source's, as cited ([n])
    source: SourceLike
    text: str  # as found in the source
    about: str  # what it is about: the name its pronoun stands for, else its source's title
    where: str  # "text", "ocr" or "title"
    position: int  # its place among its source's statements
    said: str  # as a full sentence, to show
    named: str = ""  # as found, its opening pronoun replaced by what it stands for

    @property
    def reading(self) -> Reading:
        """The statement as a person reads it: "He carved the pulpit" with its "he" named."""
        return read(self.named or self.text)

    @property
    def context(self) -> str:
        """All its source says: its title may name what the statement does not."""
        return evidence_text(self.source)


def statements(sources: Sequence[SourceLike], *, first: int = 1) -> list[Statement]:
    """The statements of the sources, in source order; `first` is the first one's number."""
    return [
        statement
        for number, source in enumerate(sources, first)
        for statement in _of_source(number, source)
    ]


def _of_source(number: int, source: SourceLike) -> Iterator[Statement]:
    title = re.sub(r"\s*\([^)]*\)$", "", source.title or "")  # "Sea Thrift (boat)"
    if title and f"the {title}".lower() in source.text.lower():  # "the Wetherley Harbor Festival"
        title = f"The {title}"
    person = ""  # the person a "he" or "she" stands for: the last one named
    # An "it" stands for the title's thing where the title names one; under a headline ("Lorry
    # damages Market Cross", "'The waiting list is longer than the rows'") for the thing the
    # sentence before was about (`subject`), as a line with no subject does.
    headline = not _names_a_thing(title)
    subject = lead = ""  # what the sentence before, and the first, were about
    quotes = _quotes(source.text)
    for position, (text, where) in enumerate(_parts(source)):
        pronoun = _opening_pronoun(text)
        reading = read(text)
        people = [  # "a tannery in Devon" names a place, though the tagger took it for a person
            reading.span_text(start, end)
            for start, end, label in reading.entities
            if label == "PERSON"
            and not (start and reading.words[start - 1].text.lower() in AT_A_PLACE)
        ]
        speaker = person and any(  # "…,' he said.": the person it names before
            w.text.lower() in PERSON_PRONOUNS and w.dep in ("nsubj", "nsubjpass")
            for w in reading.words
        )
        about = person if (pronoun in PERSON_PRONOUNS or speaker) and person else title
        if quotes and (people or person) and _first_person(reading):
            about = people[-1] if people else person  # "'… takes me forty hours,' said X."
        if where == "ocr":  # what the photo it was read in shows
            about = f"{title}. {source.text}"
        if pronoun in THING_PRONOUNS and pronoun in PERSON_PRONOUNS and person:
            about = title  # "they": the thing, unless only a person was named
        if pronoun in THING_PRONOUNS and about == title and headline and subject:
            about = subject
        elif about == title and headline and lead and not pronoun:  # a report's lead names
            about = f"{title}. {lead}"  # what it is about: "Now the average wait is …"
        # a line with no subject goes on about the thing before it ("Trains daily. Every 40 min.")
        lined = not (pronoun or where != "text" or any(w.dep in SUBJECTS for w in reading.words))
        about = f"{about}. {subject}" if lined and subject else about
        named = _named(text, about, pronoun)
        said = full_sentence(named, source, where, title)
        if said is not None and not text.rstrip(" '’\"”").endswith("?"):  # a FAQ's question
            yield Statement(number, source, text, about or title, where, position, said, named)
        person = people[-1] if people else person
        subject = _subject_phrase(read(DATELINE.sub("", named))) or subject
        lead = lead or subject


# A news report's opening place and date ("KESTLEY, 3 May - "), which the parser takes for
# the sentence's subject.
DATELINE = re.compile(r"^[A-Z][A-Z .'’-]+, [^-–—]{1,24} [-–—] ")


def _names_a_thing(title: str) -> bool:
    """Whether a title is a name ("Gull Ness lighthouse", "Brindle K2: user guide"), not a
    headline or a quotation that says something."""
    words = read(title).words
    return (
        bool(words)
        and title[:1] not in "'‘\"“"
        and not any(w.pos in ("VERB", "AUX") and w.tag != "VBN" for w in words)
    )


def _subject_phrase(reading: Reading) -> str:
    """The noun phrase a sentence is about (its main subject), if not a pronoun; a line's with
    no verb, the common noun that heads it, if it counts nothing ("Trains daily", not "Every
    40 minutes")."""
    for phrase in reading.phrases:
        head = reading.words[phrase.head]
        if head.dep in ("nsubj", "nsubjpass") and reading.words[head.head].dep == "ROOT":
            return "" if head.pos == "PRON" else phrase.text
        counted = any(c.number for c in reading.children(head.i))
        if head.dep == "ROOT" and head.pos == "NOUN" and not counted:
            return phrase.text
    return ""


def _quotes(text: str) -> bool:
    """Whether a text quotes people (",' said …"): then a sentence in which someone speaks of
    themself ("A saddle takes me forty hours") is about whoever it is quoted from, as an
    interview's reader takes it."""
    return re.search(r"[,.!?]['’”\"](?:\s|$)", text) is not None


def _first_person(reading: Reading) -> bool:
    return any(word.text.lower() in FIRST_PERSON for word in reading.words)


def _parts(source: SourceLike) -> list[tuple[str, str]]:
    """A source's sentences to answer from, each with where it comes from ("text", "ocr",
    "title"): its caption or snippet says more than its title ("Blue Door of the Wherry
    Inn"), which comes last. Text read in an image is cut at its lines, where a sign's text
    breaks: read as one sentence, a page of it with no full stop was "extracted" whole as an
    80 KB answer."""
    ocr_text = getattr(source, "ocr_text", None) or ""
    lines = [line.text for line in getattr(source, "ocr", ())] or [ocr_text]
    if len(ocr_text) <= SIGN_CHARS:  # a sign's few lines read as one ("NO ENTRY / EXCEPT BUSES")
        lines = [ocr_text]
    found = [(source.text, "text"), *((line, "ocr") for line in lines), (source.title, "title")]
    said = (
        (first_sentence(ITEM_NUMBER.sub("", sentence)), where)
        for part, where in found
        if part
        for sentence in sentences(part)
    )
    # a list's numbers alone ("3.") say nothing
    return [(sentence, where) for sentence, where in said if any(c.isalpha() for c in sentence)]


def _opening_pronoun(text: str) -> str:
    words = read(text).words
    lower = words[0].text.lower() if words else ""
    if lower == "her" and words[0].dep != "poss":
        return ""
    return lower if lower in THING_PRONOUNS or lower in PERSON_PRONOUNS else ""


def _named(text: str, name: str, pronoun: str) -> str:
    """A sentence that opens with a pronoun ("It", "Its", "She", "He"), with the name it stands
    for in its place: out of its source, "Its roof was relaid in Welsh slate" says nothing of
    the Corn Exchange."""
    if not pronoun or not name:
        return text
    ending = THING_PRONOUNS.get(pronoun, PERSON_PRONOUNS.get(pronoun, ""))
    end = read(text).words[0].end
    return f"{name}{ending}{text[end:]}"


def full_sentence(
    sentence: str, source: SourceLike, where: str = "text", title: str = ""
) -> str | None:
    """The statement as a full sentence: as written when it is one; a caption's noun phrase
    said of its photo; a line read in the image said to be read there; any other line quoted
    from its source. None for nothing to say."""
    sentence = sentence.strip()
    if not sentence:
        return None
    if where == "ocr":
        return read_in_image(sentence.rstrip("."))
    image = source.modality == "image"
    if read(sentence).finite(past=not image) and not _imperative(read(sentence)):
        return sentence
    if image:
        said, first = lower_article(sentence), read(sentence).words[0]
        if first.pos == "NOUN" and not first.proper:  # a title's "Pond in Medlar Gardens"
            said = f"the {said}"
        return f"{SHOWN} {said}"
    if where == "title":
        return None  # a text's title alone says nothing
    named = f" “{title}”" if title else ""
    return f"The source{named} says: “{sentence.rstrip()}”"


def _imperative(reading: Reading) -> bool:
    """ "Descale every 3 months." — an instruction has a base-form root and no subject."""
    return any(reading.instructs(word.i) for word in reading.words if word.dep == "ROOT")


def read_in_image(text: str) -> str:
    """Text read in an image, as a full sentence that says where it was read."""
    return f'The text in the image reads "{text.strip()}".'


def lower_article(sentence: str) -> str:
    """To follow "Yes, " or "The photo shows": "The sign ..." -> "the sign ...", "Six ducks"
    -> "six ducks", "Never used" -> "never used"; names (and "I") keep their capitals."""
    words = read(sentence).words
    if not words:
        return sentence
    first = words[0]
    lower = first.text.lower()
    plain = lower in STOPWORDS or first.number is not None or attribute(lower)
    plain = (plain or (first.pos != "PROPN" and not first.proper)) and first.text != "I"
    return f"{lower}{sentence[first.end :]}" if plain else sentence
