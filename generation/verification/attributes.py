"""Which colours, shapes and materials a sentence says of which thing: "a green hull and a white
sail" makes the sail white, not green.

Colours and materials are said as adjectives ("white sail", "yellow paper lanterns") or by a
linking verb after the noun's phrase ("the hull of the fishing boat Sea Thrift is painted blue");
shapes are mostly things themselves ("a circle on the flag") and are read from the whole
sentence. This reads the words of a sentence's `Reading` by position, not its dependency parse:
measured on the 332 held-out claims with everything else the same, binding by spaCy's parse
(an adjective's head noun, a linking verb's subject or object, a list's first member's noun)
scores 0.892 against this rule's 0.901, colours 0.875 against 0.917: the small parser misreads
caption fragments ("painted blue" as an object, "back" in "a bright blue back" as an adverb).
"""

from __future__ import annotations

from mmrag.generation.reading.text import (
    ATTRIBUTE_KIND,
    STEM,
    STOPWORDS,
    Reading,
    Word,
    attribute,
    read,
)

BOUND_KINDS = frozenset({"colour", "material"})
_LINKING = frozenset(
    {"is", "are", "was", "were", "be", "been", "painted", "coloured", "colored", "glazed", "dyed"}
)
# Where the phrase about the noun ends: "a green hull and a white sail".
_BREAKS = frozenset({"and", "with", "but", "while", "which", "that", "where", "who", "whose"})
_COORDINATING = frozenset({"and", "or", ",", "-", "bright", "dark", "light", "pale", "deep"})
ADJECTIVE_REACH = 3  # words between an adjective and its noun ("purple hanging sign")
LINK_REACH = 12  # "the glass in the window of the Chapel of St. Elowen is yellow"


def _lowers(sentence: str) -> list[str]:
    return [word.text.lower() for word in read(sentence).words]


def head_noun(reading: Reading, after: int, kind: str) -> str | None:
    """The stem of the head of the first noun phrase from character `after` on that is no
    name and no attribute of the kind asked about: what a question asks of ("the kingfisher's
    breast", "the sail of the Merganser", "the Strettle football club scarf")."""

    def asked(word: Word) -> bool:
        quality = attribute(word.text.lower())
        return not word.proper and (quality is None or ATTRIBUTE_KIND[quality] != kind)

    for phrase in reading.phrases:
        head = reading.words[phrase.head]
        if head.start >= after and head.pos != "PRON" and asked(head):
            return STEM(head.text.lower())
    # No noun phrase (the parse took "back" in "the kingfisher's back" for an adverb): the
    # last content word before a preposition, where English puts a phrase's head; no verb
    # ("painted" in "What colours is the Dabchick Belle painted?" is no thing).
    found = None
    for word in reading.words:
        if word.start < after:
            continue
        if word.pos == "ADP" and found:
            break
        if word.content and word.pos != "VERB" and asked(word):
            found = word
    return STEM(found.text.lower()) if found else None


def bound_attributes(sentence: str, nouns: frozenset[str], kind: str) -> frozenset[str]:
    """The attributes of a kind that the sentence says of any of the nouns (stems)."""
    lowers = _lowers(sentence)
    return _of_kind(lowers, _bound_positions(lowers, nouns), kind)


def attributes_of_subject(sentence: str, subject: frozenset[str], kind: str) -> frozenset[str]:
    """The attributes of a kind that the sentence says of the subject (stems) or of no noun at
    all: a loose "is a wood-flecked white" counts for the subject, "a white sail" does not."""
    lowers = _lowers(sentence)
    others = {
        STEM(lower)
        for lower in lowers
        if lower[0].isalpha() and lower not in STOPWORDS and not attribute(lower)
    } - subject
    everywhere = {at for at, lower in enumerate(lowers) if attribute(lower)}
    elsewhere = _bound_positions(lowers, frozenset(others)) - _bound_positions(lowers, subject)
    return _of_kind(lowers, everywhere - elsewhere, kind)


def _of_kind(lowers: list[str], positions: set[int], kind: str) -> frozenset[str]:
    found = (attribute(lowers[at]) for at in positions)
    return frozenset(word for word in found if word and ATTRIBUTE_KIND[word] == kind)


def _bound_positions(lowers: list[str], nouns: frozenset[str]) -> set[int]:
    """Where the attributes said of the nouns stand: before a noun as adjectives, or after a
    linking verb in the noun's phrase."""
    said: set[int] = set()
    for at, lower in enumerate(lowers):
        if not lower[0].isalpha() or STEM(lower) not in nouns:
            continue
        for before in range(at - 1, max(at - 1 - ADJECTIVE_REACH, -1), -1):
            if attribute(lowers[before]):
                said |= _coordinated(lowers, before, -1)
                break
            if lowers[before] in STOPWORDS or not lowers[before][0].isalpha():
                break
        for after in range(at + 1, min(at + 1 + LINK_REACH, len(lowers))):
            if lowers[after] in _BREAKS or not lowers[after][0].isalnum():
                break
            if attribute(lowers[after]) and _linked(lowers, after):
                said |= _coordinated(lowers, after, +1)
                break
    return said


def _linked(lowers: list[str], at: int) -> bool:
    """Whether a linking verb comes before the attribute, past an article or a shade: "is
    painted a pale grey"."""
    before = at - 1
    while before >= 0 and (lowers[before] in _COORDINATING or lowers[before] in ("a", "an")):
        before -= 1
    return before >= 0 and lowers[before] in _LINKING


def _coordinated(lowers: list[str], start: int, step: int) -> set[int]:
    """Where the attributes listed together from `start` on stand: "green and white",
    "yellow paper"."""
    found, at = set(), start
    while 0 <= at < len(lowers):
        if attribute(lowers[at]):
            found.add(at)
        elif lowers[at] not in _COORDINATING:
            break
        at += step
    return found
