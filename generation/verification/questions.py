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

from mmrag.generation.reading.text import (
    ATTRIBUTE_KIND,
    DIMENSIONS,
    STEM,
    SUBJECTS,
    Reading,
    Word,
    read,
    terms,
)
from mmrag.generation.verification.attributes import (
    BOUND_KINDS,
    attributes_of_subject,
    bound_attributes,
    head_noun,
)

_ASKS_NUMBER = re.compile(
    r"^\s*(how (many|much)|when|in what year|what year|which year|what number|which number)\b",
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
_ASKS_OBJECT = re.compile(r"^\s*what (?:does|do|did)\b", re.IGNORECASE)
# "Why was the festival cancelled?", "What is the forge known for?": a reason or a repute,
# which a sentence gives only where it says the question's verb ("Known for its gate hinges").
_ASKS_WHY = re.compile(r"^\s*(?:why|what (?:is|are|was|were)\b(?=.*\bknown for\b))", re.IGNORECASE)
# "Are there more than three ducks ...?": a count compared, not matched.
_COMPARED = re.compile(
    r"\b(more than|over|at least|fewer than|less than|under|at most) (\w+)\b", re.IGNORECASE
)
# A person named as the doer ("by Hester Sutter", "to designs by ... Piers Corrigan") or as the
# subject that opens the sentence.
EXTRACTIVE_LONG_QUESTION = 4  # content words from which one may be missing

Verdict = Literal["yes", "no"]

# The verbs questions ask about, said in other words by sources ("Who founded the bakery?",
# "opened by Mara Quell"). Small and explicit: phrase similarity takes antonyms for synonyms
# ("opened"/"closed in 1983" 0.82, "bought"/"sold by the town" 0.90, docs/BENCHMARKS.md), and
# what a question asks must be said, not resembled.
SAME_RELATION = tuple(
    frozenset(STEM(word) for word in group)
    for group in (  # lemmas, as a reading gives them ("born" is "bear")
        ("found", "establish", "open"),
        ("build", "construct", "erect"),
        ("own", "owner"),
        ("bear", "born", "birth"),
        ("die", "death"),
        ("write", "author"),
        ("complete", "finish"),
        ("stripe", "band"),
        ("begin", "start", "first"),  # "When did the festival begin?", "first held in 1942"
        ("come", "visit", "visitor", "attract"),  # "How many people come …", "attracts visitors"
        ("get", "receive", "grant", "award"),  # "When did Greywick get its arms?", "granted"
        ("live", "inhabitant", "resident", "population"),
        ("work", "employ", "employee", "staff"),
    )
)


def with_synonyms(words: frozenset[str]) -> frozenset[str]:
    """The words, and every other word of a `SAME_RELATION` group one of them is in."""
    return words.union(*(group for group in SAME_RELATION if group & words))


def _after_how(reading: Reading) -> Word | None:
    """The word after an opening "how" ("tall" in "How tall is …?"), or None."""
    words = [word for word in reading.words if word.text[0].isalnum()]
    return words[1] if len(words) > 1 and words[0].text.lower() == "how" else None


def _measure_end(question: str) -> int | None:
    """Where "How tall", "How fast", "How often" ends: "how" and an adjective or adverb ask a
    measure, a number."""
    measure = _after_how(read(question))
    return measure.end if measure is not None and measure.pos in ("ADJ", "ADV") else None


# "How big …?" asks a size, said in a unit ("covers 36 hectares"); kept out of `DIMENSIONS`,
# which grounds a claim's words: "a large 36-hectare park" judges, it does not measure.
_SIZES = frozenset({"big", "large"})


def _dimension(reading: Reading) -> Word | None:
    """The measure "How tall", "How long", "How big" asks: one said with its unit."""
    measure = _after_how(reading)
    sized = measure is not None and (measure.lemma in DIMENSIONS or measure.lemma in _SIZES)
    return measure if sized else None


def _asks_dimension(question: str) -> bool:
    return _dimension(read(question)) is not None


def asks_number(question: str) -> bool:
    """ "How many", "How tall", "when", "in what year", "what number"."""
    return bool(_ASKS_NUMBER.match(question)) or _measure_end(question) is not None


def asks_yes_no(question: str) -> bool:
    """ "Is the door red?", "Did …", "Can …": but "Can you tell me about …" is a request."""
    return bool(_ASKS_YES_NO.match(question)) and not asks_open(question)


def asked_attribute(question: str) -> str | None:
    """The kind of attribute asked for: "colour", "shape", "material", or None."""
    match = _ASKS_ATTRIBUTE.match(question)
    if match:
        return {"color": "colour"}.get(match.group(1).lower(), match.group(1).lower())
    return "material" if _ASKS_MATERIAL.match(question) else None


def question_subject(question: str, kind: str) -> frozenset[str] | None:
    """The stems naming what a colour or material question is about, or None where the
    attribute is not bound to a noun (shapes) or no head noun is found."""
    opening = _ASKS_YES_NO.match(question) or _ASKS_ATTRIBUTE.match(question)
    head = head_noun(read(question), opening.end() if opening else 0, kind)
    if kind in BOUND_KINDS and head:
        return with_synonyms(frozenset({head}))
    return None


def said_of_subject(question: str, sentence: str, kind: str) -> frozenset[str]:
    """The attributes of a kind the sentence gives the question's subject: for colours and
    materials those it says of the subject's head noun (`bound_attributes`: "What colour is
    the sail?" is not answered by "a green hull and a white sail"'s green), for shapes all."""
    subject = question_subject(question, kind)
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
    subject = question_subject(question, kind)
    if subject is None:
        return said
    return attributes_of_subject(claim, subject, kind) & said or said


def _opening_end(question: str) -> int | None:
    """Where a typed question's opening ends ("Who", "How tall", "What colour", "What does"),
    or None for an untyped one."""
    for asks in _TYPED:
        if opening := asks.match(question):
            return opening.end()
    if (measured := _measure_end(question)) is not None:
        return measured
    for asks in (_ASKS_OBJECT, _ASKS_WHY):  # "What does the Mill Bridge carry?"
        if opening := asks.match(question):
            return opening.end()
    return None


def relation(question: str) -> frozenset[str]:
    """What a typed question ("who", "when", "how many", "where", "what colour", "what does")
    asks about its subject: the stems of its verbs after the opening ("owns", "close",
    "designed", "carry"), and the role a "who is" question names ("Who is the priest …?").
    The answer type alone (any person, any number, any colour) says nothing of it, so an answer
    must state it and its source must say it (not only the question): Tomas Mallory who built
    the inn does not answer "Who owns the inn?", nor the glazier of a chapel who its priest is.
    Untyped questions and open requests have none."""
    after = _opening_end(question)
    if after is None or asks_open(question):
        return frozenset()
    reading = read(question)
    verbs = {  # what it asks, not what describes its thing ("the shop painted green")
        w
        for w in reading.words
        if w.start >= after
        and w.pos == "VERB"
        # "known for" asserts what a thing is known for; "known as" only names it
        and ((w.content and w.dep not in ("acl", "amod")) or w.lemma == "know")
    }
    roles = set()
    if _ASKS_PERSON.match(question):
        roots = [w for w in reading.words if w.dep == "ROOT" and w.pos == "AUX"]
        roles = {
            child
            for root in roots
            for child in reading.children(root.i)
            if child.dep in ("attr", "nsubj") and child.pos == "NOUN" and child.content
        }
    return frozenset(STEM(word.lemma) for word in verbs | roles)


def states(sentence: str) -> frozenset[str]:
    """The relations a sentence says (stems, with their `SAME_RELATION` synonyms): its words,
    but not those that only name a kind of thing ("fishing" in "the fishing boat Gannet" says
    nothing of what the Gannet fishes for); a person's title is said of them ("the architect
    Hester Ashby")."""
    reading = read(sentence)
    said = {
        STEM(w.lemma)
        for w in reading.words
        if w.dep not in ("compound", "amod") or reading.words[w.head].pos == "PROPN"
    }
    return with_synonyms(frozenset(said))


def asks_place(question: str) -> bool:
    return bool(_ASKS_PLACE.match(question))


def gives_what_is_asked(question: str, sentence: str, *, place_named: bool = False) -> bool:
    """A number for "how many" or "when", a place for "where" (with `place_named`, a place's
    name), a person's name for "who", a colour for "what colour" (one the question does not
    name), a name for "what is the name of"; other questions ask for nothing this can check."""
    asked, said = terms(question), terms(sentence)
    if asks_number(question) and not said.numbers - asked.numbers:
        return False
    if _asks_dimension(question) and not any(w.unit for w in read(sentence).words):
        return False  # "How tall …?" is answered in metres, not by a "1" read on a clock
    if asks_place(question) and not _places(sentence, asked.names, place_named) - asked.names:
        return False
    kind = asked_attribute(question)
    if kind and not said_of_subject(question, sentence, kind) - asked.attributes:
        return False
    if _ASKS_NAME.match(question) and not said.names - asked.names:
        return False
    if _ASKS_PERSON.match(question):
        # A name made mostly of the question's words is the thing asked about, not a doer:
        # "Blue Door of the Harbor Inn" does not answer "Who painted the door of the Harbor
        # Inn?"; "the Dunmore Civic Society" answers who organises the Dunmore Harbor Festival,
        # and "Agnes Hollins" who founded the Hollins Brewery.
        named = [{STEM(w.lemma) for w in person if w.proper} for person in _people(sentence)]
        return any(name and 2 * len(name & asked.words) <= len(name) for name in named)
    return True


# Where a place's name stands: after a preposition of place ("stands on Mill Lane"), not of
# a doer ("built by Nessa Penhallow") or a time.
_AT_A_PLACE = frozenset({"in", "on", "at", "near", "beside", "along", "across", "over", "off"})


def _places(sentence: str, asked: frozenset[str], named: bool) -> frozenset[str]:
    """The stems of the places a sentence gives: a name after a preposition of place or one the
    tagger calls a place ("stands on Mill Lane"), or a thing after one ("nests on narrow ledges
    of sea cliffs"), never a date ("in 1766"), nor a part of the thing asked about, named by
    the question's names (`asked`): "at the upper floor of the Crown Inn" is not where the
    Crown Inn is. With `named`, the names only."""
    reading = read(sentence)
    found: set[str] = set()
    for start, end in reading.name_spans():
        words = reading.words[start:end]
        before = [w for w in reading.words[max(0, start - 2) : start] if w.text.lower() != "the"]
        placed = bool(before) and before[-1].text.lower() in _AT_A_PLACE
        if placed or any(w.entity in ("GPE", "LOC", "FAC") for w in words):
            found |= {STEM(w.lemma) for w in words if w.proper}
    for word in [] if named else reading.words:
        head = reading.words[word.head]
        at_a_place = head.dep == "prep" and head.text.lower() in _AT_A_PLACE
        thing = word.dep == "pobj" and word.pos == "NOUN" and not word.entity
        if thing and at_a_place and not {STEM(w.lemma) for w in reading.subtree(word.i)} & asked:
            found.add(STEM(word.lemma))
    return frozenset(found)


def _request(reading: Reading) -> Word | None:
    """The verb of a request ("Tell me about …", "Describe …", "Can you tell me …", "What do
    you know about …"): a root verb with no subject but its listener. A question that opens
    with "how", "what" or "which" asks its own thing ("How many steps do you climb …?"); one
    that asks about a thing is `_about`'s ("What can you tell me about …")."""
    opening = next((word for word in reading.words if word.text[0].isalnum()), None)
    if opening is not None and opening.tag in ("WDT", "WP", "WP$", "WRB"):
        return None
    for word in reading.words:
        if word.dep != "ROOT" or word.pos != "VERB":
            continue
        subjects = [c for c in reading.children(word.i) if c.dep in ("nsubj", "nsubjpass")]
        listener = bool(subjects) and all(s.text.lower() == "you" for s in subjects)
        if listener or (not subjects and word.tag == "VB"):  # "Can you tell", "Describe"
            return word
    return None


def _about(reading: Reading) -> Word | None:
    """ "about …" said of the question's root or its adjective ("What is special about …")."""
    roots = [word for word in reading.words if word.dep == "ROOT"]
    near = [*roots, *(c for root in roots for c in reading.children(root.i) if c.dep == "acomp")]
    for word in near:
        for child in reading.children(word.i):
            if child.dep == "prep" and child.text.lower() == "about":
                return child
    return None


def _as_request(question: str) -> Reading:
    """The reading in which a request is seen: spaCy's small model takes a capitalised verb
    that opens a line of names for one more name ("Describe Kestrel Point Lighthouse"), so
    a question with no request is read again with its first letter in lower case."""
    reading = read(question)
    opening = reading.words[0] if reading.words else None
    if _request(reading) is None and opening is not None and opening.pos == "PROPN":
        again = read(question[:1].lower() + question[1:])
        if _request(again) is not None:
            return again
    return reading


def _looks(reading: Reading) -> Word | None:
    """The thing of "What does the Kell Bridge look like?", a request to describe it."""
    for word in reading.words:
        if word.lemma == "look" and any(c.text.lower() == "like" for c in reading.children(word.i)):
            return next((c for c in reading.children(word.i) if c.dep in SUBJECTS), None)
    return None


def asks_open(question: str) -> bool:
    """An open request, asking for anything the sources say of a thing: "Tell me about the
    Harbor Inn", "Describe Kestrel Point Lighthouse", "What is special about …", "What does
    the Kell Bridge look like?"."""
    reading = _as_request(question)
    return any(find(reading) is not None for find in (_request, _about, _looks))


def asks_appearance(question: str) -> bool:
    """ "Describe the flag of Korvath", "What does the Kell Bridge look like?": what a photo's
    caption says first."""
    reading = _as_request(question)
    request = _request(reading)
    return _looks(reading) is not None or (request is not None and request.lemma == "describe")


def _objects(reading: Reading, word: Word) -> list[Word]:
    """The things a word is said of: its objects, not pronouns ("me", "what")."""
    return [
        child
        for child in reading.children(word.i)
        if child.dep in ("pobj", "dobj") and child.pos != "PRON" and child.tag not in ("WP", "WDT")
    ]


def topic(question: str) -> str:
    """What an open request asks about ("the Harbor Inn"), or the whole question; "some facts
    about the Aldric Tower" is about the Aldric Tower."""
    reading = _as_request(question)
    about, request = _about(reading), _request(reading)
    heads = _objects(reading, about) if about else []
    if not heads and (looked := _looks(reading)) is not None:
        heads = [looked]
    if not heads and request is not None:
        preps = [c for c in reading.children(request.i) if c.dep == "prep"]
        heads = _objects(reading, request) + [o for p in preps for o in _objects(reading, p)]
    if not heads:
        return question
    head = heads[0]
    inner = [c for c in reading.children(head.i) if c.dep == "prep" and c.text.lower() == "about"]
    if inner and _objects(reading, inner[0]):
        head = _objects(reading, inner[0])[0]
    words = reading.subtree(head.i)
    # The tagger may hang a place on the request, not on its thing: "Describe [the pond] [in
    # Queen Maud Gardens]" asks about the pond in Queen Maud Gardens.
    hung = [] if request is None else reading.children(request.i)
    for prep in hung:
        if prep.dep == "prep" and prep.i == words[-1].i + 1 and prep.text.lower() != "about":
            words = [*words, *reading.subtree(prep.i)]
    return question[words[0].start : words[-1].end]


def options(question: str) -> list[frozenset[str]]:
    """The things a choice offers ("…, the Anchor Hotel or the Kingfisher Hotel?"), as the
    stems of their names; none for other questions."""
    reading = read(question)
    if not any(word.text.lower() == "or" for word in reading.words):
        return []
    named = [terms(reading.span_text(*span)).names for span in reading.name_spans()]
    named = [name for name in named if name]
    return named if len(named) > 1 else []


def picks_one(text: str, offered: list[frozenset[str]]) -> bool:
    """Whether a text names one of a choice's things and not the others: an answer to the
    choice, though every word of it is the question's."""
    said = terms(text).words
    return sum(option <= said for option in offered) == 1


def _asked_kinds(reading: Reading) -> list[Word]:
    """The nouns a "which"/"what"/"how many" determines ("which street", "what kind of bird",
    "how many people"), and the dimension of a measure ("how long", "how big"), which the
    answer gives in its unit ("flows for 41 kilometres")."""
    kinds = [measure] if (measure := _dimension(reading)) is not None else []
    for word in reading.words:
        many = word.lemma in ("many", "much") and word.dep == "amod"
        if many and any(c.text.lower() == "how" for c in reading.children(word.i)):
            kinds.append(reading.words[word.head])
        if word.tag == "WDT" and word.dep == "det":
            kind = reading.words[word.head]
            kinds.append(kind)
            preps = [p for p in reading.children(kind.i) if p.dep == "prep"]
            kinds += [c for p in preps for c in reading.children(p.i)]  # "kind of bird"
    return kinds


def _people(sentence: str) -> list[list[Word]]:
    """The names a sentence gives as a doer: after "by" ("by Hester Sutter", "to designs by
    the architect Piers Corrigan", "run by the Hobbs family"), or as its subject ("The engineer
    Agnes Thorley designed …", or opening it); of two words at least, as people's names are,
    unless "by" comes right before."""
    reading = read(sentence)
    found = []
    for start, end in reading.name_spans():
        words = [w for w in reading.words[start:end] if w.proper]
        before = [w.text.lower() for w in reading.words[max(0, start - 5) : start]]
        subject = start == 0 or any(  # "The engineer Agnes Thorley": a title's apposition
            w.dep == "nsubj" or (w.dep == "appos" and reading.words[w.head].dep == "nsubj")
            for w in words
        )
        right_after = [w for w in before[-2:] if w != "the"][-1:] == ["by"]
        if ("by" in before or subject) and (len(words) >= 2 or right_after):
            found.append(words)
    return found


def answers_the_question(
    question: str,
    sentence: str,
    context: str = "",
    *,
    kind_named: bool = True,
    exact: bool = False,
    place_named: bool = False,
) -> bool:
    """Whether a source sentence could stand as the answer: it holds the question's content
    (its numbers, names and `relation` all, and all its words but one in a longer question),
    adds something, and adds what the question asks for (`gives_what_is_asked`). Without a
    reader model this is strict on purpose: an extracted sentence about the right thing that
    says something else ("opened in 1983" for "When did the cafe close?") must not pass for an
    answer. An open request ("Tell me about the Harbor Inn") is answered by a sentence about its
    `topic` that says more than its name. `context`, the rest of the sentence's source (its
    title, the text read in its image), may hold the question's words: "A small sign fixed to
    a lamp post in Mill Lane" answers which street the sign reading "DOUBLE PARKING
    PROHIBITED" is on; what the question asks (its relation) must be in the sentence."""
    if asks_open(question):
        question = topic(question)
    asked, said = terms(question), terms(sentence)
    held = said.words | terms(context).words
    offered = options(question)
    if offered:  # a choice: the sentence names the one it says it of
        if not picks_one(sentence, offered):
            return False
        held |= frozenset().union(*offered)
    if not asked.words or not said.words - asked.words or asked.key - held:
        return False
    if relation(question) - states(sentence):
        return False
    missing = asked.words - with_synonyms(held)
    # One word of a longer question may be missing ("written" for "painted with the word"),
    # unless `exact`; with `kind_named`, not the kind it asks for ("What contests …?" is not
    # answered by "an annual festival held in Marrow Point"). Without, that word may be the
    # kind, in a shorter question too: "Which street …?" is answered by "Mill Lane", "How many
    # people live in Estival?" by "about 502,000 inhabitants", "How long is the River Grey?"
    # by "flows for 41 kilometres". Never both: "morning" and "time" unsaid, "opened in 1864"
    # does not say what time the bakery opens in the morning.
    kinds = {STEM(w.lemma) for w in _asked_kinds(read(question))}
    spared = 1 if len(asked.words) >= EXTRACTIVE_LONG_QUESTION and not exact else 0
    if kind_named and missing & kinds:
        return False
    if len(missing) > spared and not (not kind_named and len(missing) == 1 and missing <= kinds):
        return False
    return gives_what_is_asked(question, sentence, place_named=place_named)


def counts(text: str) -> dict[str, str]:
    """Counted things: "three red bands" -> {"band": "3"} (each number's noun)."""
    reading = read(text)
    found = {}
    for word in reading.words:
        if word.number is not None and word.dep == "nummod":
            found.setdefault(STEM(reading.words[word.head].lemma), word.number)
    return found


def yes_no_verdict(question: str, sentence: str, context: str = "") -> Verdict | None:
    """What a source sentence says to a yes/no question, or None where it says nothing: it
    must be about the question's subject (its names, and its other words but one in a longer
    question; `context`, the source's title, may name them); then it states the asked colour,
    shape, material or count (yes), or another of the same kind (no). "Are there more than
    three ducks" compares the counts. A question that asks no such fact ("Was the castle ever
    besieged?") is answered by the sentence that says what it asks: "no" if it denies it."""
    asked, said = terms(question), terms(sentence)
    about = said.words | terms(context).words
    facts = asked.attributes | asked.numbers
    if asked.names - about:
        return None
    subject = asked.words - facts
    missing = subject - with_synonyms(about)
    if len(missing) > (1 if len(subject) >= EXTRACTIVE_LONG_QUESTION else 0):
        return None
    if not facts:
        return _denied_or_said(question, sentence)
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


def _denied_or_said(question: str, sentence: str) -> Verdict | None:
    """The verdict of a sentence that says what a question asks (its verbs and adjectives,
    "besieged", "open"; for "Are there …?" the things, which the caller found in it): "no"
    where it denies it, "yes" where it says it; None where it does not say it."""
    asked = read(question)
    predicate = {
        STEM(w.lemma) for w in asked.words if w.content and w.pos in ("VERB", "ADJ") and w.i > 0
    }
    reading = read(sentence)
    denied = any(w.dep == "neg" or (w.dep, w.text.lower()) == ("det", "no") for w in reading.words)
    if not predicate and any(word.dep == "expl" for word in asked.words):
        return "no" if denied else "yes"  # "Are there swans …?": the sentence about them says
    if not predicate or not predicate <= {STEM(w.lemma) for w in reading.words}:
        return None
    return "no" if denied else "yes"


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
    words = [word for word in read(claim).words if word.text[0].isalnum()]
    if words and words[0].text.lower() == "no":
        return "no"
    return "no" if any(word.dep == "neg" for word in words) else "yes"
