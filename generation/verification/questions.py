"""What a question asks for, and whether a sentence gives it: the reading a lexical verifier
and an extractive answer need when there is no reader model.

A typed question ("how many", "who", "what colour", "what is the name of") asks for a kind of
fact, and an answer that states some other true thing about its subject does not answer it. A
yes/no question is answered by the source, not the model: small models say "Yes" to anything,
so the verdict is read from a source sentence about the subject (it states the asked colour,
shape, material or count: yes; it states another of the same kind: no) and the model's answer
must agree with it.
"""

from __future__ import annotations

import re
from typing import Literal

from mmrag.generation.verification.lexicon import (
    ATTRIBUTE_KIND,
    BOUND_KINDS,
    NUMBER_WORDS,
    STEM,
    STOPWORDS,
    as_number,
    attributes_of_subject,
    bound_attributes,
    denies,
    head_noun,
    terms,
    with_synonyms,
)

_ASKS_NUMBER = re.compile(
    r"^\s*(how (many|much|tall|long|old|high|far|big|wide|deep|heavy|large)|when|in what year|"
    r"what year|which year|what number|which number)\b",
    re.IGNORECASE,
)
_ASKS_PLACE = re.compile(r"^\s*where\b", re.IGNORECASE)
_ASKS_PERSON = re.compile(r"^\s*(who|whom|whose)\b", re.IGNORECASE)
_ASKS_ATTRIBUTE = re.compile(
    r"^\s*(?:what|which) (?:kind of |type of )?(colou?r|shape|material)s?\b", re.IGNORECASE
)
_ASKS_MATERIAL = re.compile(r"^\s*what (?:is|are|was|were)\b.* made (?:of|from)\b", re.IGNORECASE)
_ASKS_NAME = re.compile(
    r"^\s*(what|what's) (?:is |was |are )?(?:the )?names? of\b|^\s*what (?:is|was)\b.* called\b",
    re.IGNORECASE,
)
_ASKS_YES_NO = re.compile(
    r"^\s*(is|are|was|were|does|do|did|has|have|had|can|could|will|would)\b", re.IGNORECASE
)
_TYPED = (_ASKS_NUMBER, _ASKS_PLACE, _ASKS_PERSON, _ASKS_ATTRIBUTE, _ASKS_NAME)
# "Are there more than three ducks ...?": a count compared, not matched.
_NUMBER = "|".join([r"\d+", *NUMBER_WORDS])
_COMPARED = re.compile(
    rf"\b(more than|over|at least|fewer than|less than|under|at most) ({_NUMBER})\b", re.IGNORECASE
)
# A person named as the doer ("by Hester Sutter", "to designs by ... Piers Corrigan") or as the
# subject that opens the sentence.
_PERSON = re.compile(r"\bby (?:[a-z]+ ){0,4}([A-Z][a-z]+ [A-Z][a-z]+)|^([A-Z][a-z]+ [A-Z][a-z]+) ")
_DENIAL = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")
_WORD = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+")
COUNT_REACH = 3  # "three red bands": the counted noun within this many words of its number
EXTRACTIVE_LONG_QUESTION = 4  # content words from which one may be missing

Verdict = Literal["yes", "no"]


def asks_number(question: str) -> bool:
    """ "How many", "when", "in what year", "what number"."""
    return bool(_ASKS_NUMBER.match(question))


def asks_yes_no(question: str) -> bool:
    return bool(_ASKS_YES_NO.match(question))


def asked_attribute(question: str) -> str | None:
    """The kind of attribute asked for: "colour", "shape", "material", or None."""
    match = _ASKS_ATTRIBUTE.match(question)
    if match:
        return {"color": "colour"}.get(match.group(1).lower(), match.group(1).lower())
    return "material" if _ASKS_MATERIAL.match(question) else None


def _subject(question: str, kind: str) -> frozenset[str] | None:
    """The stems naming what a colour or material question is about, or None where the
    attribute is not bound to a noun (shapes) or no head noun is found."""
    opening = _ASKS_YES_NO.match(question) or _ASKS_ATTRIBUTE.match(question)
    head = head_noun(question[opening.end() if opening else 0 :], terms(question).names, kind)
    if kind in BOUND_KINDS and head:
        return with_synonyms(frozenset({head}))
    return None


def said_of_subject(question: str, sentence: str, kind: str) -> frozenset[str]:
    """The attributes of a kind the sentence gives the question's subject: for colours and
    materials those it says of the subject's head noun (`bound_attributes`: "What colour is
    the sail?" is not answered by "a green hull and a white sail"'s green), for shapes all."""
    subject = _subject(question, kind)
    if subject is None:
        return terms(sentence).of_kind(kind)
    return bound_attributes(sentence, subject, kind)


def claimed_of_subject(question: str, claim: str, kind: str) -> frozenset[str]:
    """The attributes of a kind an answer gives the question's subject: those it says of the
    subject's head noun or of no noun, so "the hull is a wood-flecked white, with a green hull
    and a white sail" claims white and green for the hull, "a green hull and a white sail"
    only green. Denied ones ("black, not red") are not claimed; an answer that gives the
    subject none claims every one it names."""
    said = terms(claim).of_kind(kind)
    subject = _subject(question, kind)
    if subject is None:
        return said
    return attributes_of_subject(claim, subject, kind) & said or said


def relation(question: str) -> frozenset[str]:
    """What a typed question ("who", "when", "how many", "where", "what colour") asks about its
    subject: its words after the opening, less names, numbers and attributes ("owns", "close",
    "roof"). The answer type alone (any person, any number, any colour) says nothing of it, so
    an answer must state it and its source must say it: Tomas Mallory who built the inn does
    not answer "Who owns the inn?", nor the colour of a door "What colour is the roof?".
    Untyped questions have none."""
    for asks in _TYPED:
        opening = asks.match(question)
        if opening:
            asked = terms(question)
            rest = terms(question[opening.end() :]).words - terms(opening.group()).words
            return rest - asked.key
    return frozenset()


def gives_what_is_asked(question: str, sentence: str) -> bool:
    """A number for "how many" or "when", a place's name for "where", a person's for "who", a
    colour for "what colour" (one the question does not name), a name for "what is the name
    of"; other questions ask for nothing this can check."""
    asked, said = terms(question), terms(sentence)
    if asks_number(question) and not said.numbers - asked.numbers:
        return False
    if _ASKS_PLACE.match(question) and not said.names - asked.names:
        return False
    kind = asked_attribute(question)
    if kind and not said_of_subject(question, sentence, kind) - asked.attributes:
        return False
    if _ASKS_NAME.match(question) and not said.names - asked.names:
        return False
    if _ASKS_PERSON.match(question):
        # A name that repeats the question's words is the thing asked about, not a person:
        # "Blue Door of the Harbor Inn" does not answer "Who painted the door of the Harbor Inn?"
        people = [next(filter(None, match.groups())) for match in _PERSON.finditer(sentence)]
        named = [terms(f"x {person}").names for person in people]
        return any(name and not name & asked.words for name in named)
    return True


def answers_the_question(question: str, sentence: str) -> bool:
    """Whether a source sentence could stand as the answer: it holds the question's content
    (its numbers, names and `relation` all, and all its words but one in a longer question),
    adds something, and adds what the question asks for (`gives_what_is_asked`). Without a
    reader model this is strict on purpose: an extracted sentence about the right thing that
    says something else ("opened in 1983" for "When did the cafe close?") must not pass for an
    answer."""
    asked, said = terms(question), terms(sentence)
    if not asked.words or not said.words - asked.words or asked.key - said.words:
        return False
    missing = asked.words - with_synonyms(said.words)
    if missing & relation(question):
        return False
    # One word of a longer question may be missing ("written" for "painted with the word").
    if len(missing) > (1 if len(asked.words) >= EXTRACTIVE_LONG_QUESTION else 0):
        return False
    return gives_what_is_asked(question, sentence)


def counts(text: str) -> dict[str, str]:
    """Counted things: "three red bands" -> {"band": "3"} (the nouns after each number)."""
    tokens = [token.lower() for token in _WORD.findall(text)]
    found = {}
    for position, token in enumerate(tokens):
        number = as_number(token)
        if number:
            for noun in tokens[position + 1 : position + 1 + COUNT_REACH]:
                if noun not in STOPWORDS:
                    found.setdefault(STEM(noun), number)
    return found


def yes_no_verdict(question: str, sentence: str) -> Verdict | None:
    """What a source sentence says to a yes/no question, or None where it says nothing: it
    must be about the question's subject (its names, and its other words but one in a longer
    question); then it states the asked colour, shape, material or count (yes), or another of
    the same kind (no). "Are there more than three ducks" compares the counts."""
    asked, said = terms(question), terms(sentence)
    facts = asked.attributes | asked.numbers
    if not facts or asked.names - said.words:
        return None
    subject = asked.words - facts
    missing = subject - with_synonyms(said.words)
    if len(missing) > (1 if len(subject) >= EXTRACTIVE_LONG_QUESTION else 0):
        return None
    asked_counts, said_counts = counts(question), with_synonym_keys(counts(sentence))
    compared = _COMPARED.search(question)
    if compared:
        return _compare(compared, asked_counts, said_counts)
    kinds = {ATTRIBUTE_KIND[word] for word in asked.attributes}
    given = frozenset().union(*(said_of_subject(question, sentence, kind) for kind in kinds))
    if asked.attributes <= given and asked.numbers <= said.words:
        return "yes"
    if given - asked.attributes:
        return "no"
    if any(said_counts.get(noun, number) != number for noun, number in asked_counts.items()):
        return "no"
    return None


def with_synonym_keys(counted: dict[str, str]) -> dict[str, str]:
    """Counts keyed by every synonym of each noun too ("2 bands" counts stripes)."""
    keyed = dict(counted)
    for noun, number in counted.items():
        for synonym in with_synonyms(frozenset({noun})):
            keyed.setdefault(synonym, number)
    return keyed


def _compare(
    compared: re.Match, asked_counts: dict[str, str], said_counts: dict[str, str]
) -> Verdict | None:
    """The verdict on "more than N" and the like, from the sentence's count of the same noun."""
    relation_words, _ = compared.groups()
    for noun, limit in asked_counts.items():
        if noun in said_counts:
            have, bound = float(said_counts[noun]), float(limit)
            holds = {
                "more than": have > bound,
                "over": have > bound,
                "at least": have >= bound,
                "fewer than": have < bound,
                "less than": have < bound,
                "under": have < bound,
                "at most": have <= bound,
            }[relation_words.lower()]
            return "yes" if holds else "no"
    return None


def polarity(claim: str) -> Verdict:
    """What a yes/no answer says: "no" if it opens with "No" or denies something."""
    opening = _WORD.match(claim.strip())
    if opening and opening.group().lower() == "no":
        return "no"
    return "no" if any(denies(token) for token in _DENIAL.findall(claim)) else "yes"
