"""A question read once into what it asks: its kind, the type of answer it expects, the thing it
asks about and what it asks of it.

Every stage that needs to know what a question asks (the prompt, the choice of the answering
statement, grounding, the scene-text chooser, the conversation resolver) takes this object,
built once from the question's `Reading`; none reads the question string again. The type of
answer comes from the wh-word and the words it governs ("how many", "what time", "which
street", "how long"), and is matched against what spaCy's entity tagger says a statement gives
(TIME, DATE, MONEY, QUANTITY, CARDINAL, PERSON, GPE/LOC/FAC, ORG, PERCENT), the colour, shape
and material words, and numbers with their units.
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from typing import Literal

from mmrag.generation.reading.lexicon import names_a_property, synonyms
from mmrag.generation.reading.text import STEM, SUBJECTS, Reading, Terms, Word, read
from mmrag.generation.reading.words import (
    ATTRIBUTE_KIND,
    ATTRIBUTE_NOUNS,
    DIMENSIONS,
    HOW_MEASURES,
    LIGHT_VERBS,
    MONEY_VERBS,
    MONEY_WORDS,
    NOW,
    SAME_RELATION,
    TYPE_NOUNS,
)

Kind = Literal["factoid", "yes_no", "choice", "open", "count", "measure"]
WH_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})
_WH_TYPES = {
    "when": frozenset({"date", "time"}),
    "where": frozenset({"place"}),
    "who": frozenset({"person", "organisation"}),
    "whom": frozenset({"person", "organisation"}),
    "whose": frozenset({"person", "organisation"}),
    "why": frozenset({"reason"}),
}
# "more than three", "at least 2": a count compared, not matched; the words before a number.
_COMPARISONS = {
    ("more", "than"): "more",
    ("over",): "more",
    ("fewer", "than"): "fewer",
    ("less", "than"): "fewer",
    ("under",): "fewer",
    ("at", "least"): "at least",
    ("at", "most"): "at most",
}
RELATIONS = tuple(frozenset(STEM(word) for word in group) for group in SAME_RELATION)


def with_synonyms(stems: frozenset[str]) -> frozenset[str]:
    """The stems, and every other stem of a `SAME_RELATION` group one of them is in."""
    return stems.union(*(group for group in RELATIONS if group & stems))


@dataclass(frozen=True)
class Question:
    """What a question asks. `expects` is the set of answer types a right answer gives one of
    ("date", "time", "money", "quantity", "count", "person", "organisation", "place",
    "colour", "shape", "material", "name", "reason", "share"), empty where any new fact
    answers ("What does the bridge carry?"); `measures` the dimensions a measure is said in
    ("length", "duration"); `kinds` the stems of the nouns naming the kind of thing asked for
    ("street" in "Which street …", "kayak" in "How many kayaks …")."""

    text: str
    reading: Reading
    kind: Kind
    expects: frozenset[str]
    measures: tuple[str, ...]
    kinds: frozenset[str]
    topic: str
    relation: frozenset[str]
    choices: tuple[frozenset[str], ...]
    compared: tuple[str, str] | None  # ("more", "3") for "more than three"
    now: bool  # asks of the present: "still", "now", "Is …" (a former state answers no)
    appearance: bool  # "Describe …", "What does … look like?": what a photo shows
    opening_end: int  # where the asking words end ("What colour", "How tall", "Who")

    @property
    def terms(self) -> Terms:
        return self.reading.terms

    @functools.cached_property
    def topic_terms(self) -> Terms:
        return read(self.topic).terms

    @functools.cached_property
    def topic_head(self) -> frozenset[str]:
        """The stem of the noun its topic is about: "cat" in "the cat at the Mill Arms"."""
        return frozenset(STEM(w.lemma) for w in read(self.topic).words if w.dep == "ROOT")

    @functools.cached_property
    def dimension(self) -> str | None:
        """The dimension its asking words name ("height" for "How tall …?"), where they do: a
        measure said to be another ("96 metres long") does not answer it."""
        asking = (w for w in self.reading.words if w.end <= self.opening_end)
        return next((DIMENSIONS[w.lemma] for w in asking if w.lemma in DIMENSIONS), None)

    @functools.cached_property
    def synonyms(self) -> dict[str, frozenset[str]]:
        """Each content word's stem, with the stems of its WordNet synonyms and of the words
        just narrower: a source may say the "warranty" of what the question calls a
        "guarantee", or that "hens" are kept where it asks of "chickens"."""
        found: dict[str, frozenset[str]] = {}
        for word in self.reading.words:
            if word.content and not word.proper and word.number is None:
                said = frozenset(STEM(s) for s in synonyms(word.lemma, word.pos, narrower=True))
                found[STEM(word.lemma)] = found.get(STEM(word.lemma), frozenset()) | said
        return found

    @functools.cached_property
    def comparatives(self) -> frozenset[str]:
        """The lemmas of the comparatives a choice is asked by ("long" of "Which is longer,
        …?"), with their WordNet synonyms ("large" for "bigger")."""
        asked = {d.lemma for d in self.reading.degrees if d.kind == "comparative"}
        return frozenset(asked).union(*(synonyms(lemma, "ADJ") for lemma in asked))

    def said_otherwise(self, held: frozenset[str]) -> frozenset[str]:
        """Its stems whose synonyms are held: what a text says in other words."""
        return frozenset(stem for stem, other in self.synonyms.items() if other & held)

    @functools.cached_property
    def squeezed(self) -> str:
        """Its letters and digits run together, lower-cased: a sign's "LITTLEBITTERN" is in it."""
        return "".join(ch for ch in self.text.lower() if ch.isalnum())

    @property
    def attribute(self) -> str | None:
        """The kind of attribute asked for ("colour", "shape", "material"), if any."""
        return next(
            (kind for kind in ("colour", "shape", "material") if kind in self.expects), None
        )

    @property
    def numeric(self) -> bool:
        """Whether its answer is a number: a count, a measure, a year, a time, a price."""
        return self.kind in ("count", "measure") or bool(
            self.expects & {"count", "quantity", "money", "date", "time", "share"}
        )

    @property
    def typed(self) -> bool:
        """Whether it asks for a type of fact (not any new word about its thing)."""
        return bool(self.expects) or self.kind in ("count", "measure")

    def __str__(self) -> str:
        return self.text


@functools.lru_cache(maxsize=1024)
def read_question(text: str) -> Question:
    """The question read once (cached by text: a conversation asks it of several stages)."""
    reading = _as_request(_spelt(text))
    words = [word for word in reading.words if word.text[0].isalnum()]
    wh = next((word for word in words[:3] if word.tag in WH_TAGS), None)
    request = _request(reading) or _about(reading) or _looks(reading)
    choices = _choices(reading)
    kind: Kind = "factoid"
    expects: frozenset[str] = frozenset()
    measures: tuple[str, ...] = ()
    kinds: set[str] = set()
    opening_end = wh.end if wh is not None else 0
    # "Does Pennock's … sell …?", however the parser tags "Does"
    opens_do = bool(words) and words[0].lemma == "do"
    if request is not None:
        kind = "open"
        opening_end = _request_end(reading, request)
    elif wh is None and words and (words[0].pos == "AUX" or words[0].tag == "MD" or opens_do):
        kind = "choice" if choices else "yes_no"
        opening_end = words[0].end
    elif wh is not None:
        kind, expects, measures, kinds, opening_end = _asked(reading, wh)
        if choices and wh.lemma in ("which", "who"):
            kind = "choice"
    if kind == "factoid" and not expects and not kinds and wh is not None:
        expects = _what_it_names(reading, wh)
    compared = _compared(reading)
    lemmas = {word.lemma for word in words}
    now = bool(lemmas & NOW) or (
        kind == "yes_no" and words[0].tag in ("VBZ", "VBP") and "ever" not in lemmas
    )
    return Question(
        text=text,
        reading=reading,
        kind=kind,
        expects=expects,
        measures=measures,
        kinds=frozenset(kinds),
        topic=_topic(reading, wh, kind),
        relation=_relation(reading, opening_end, kind, expects),
        choices=choices,
        compared=compared,
        now=now,
        appearance=_appearance(reading),
        opening_end=opening_end,
    )


def as_question(question: Question | str) -> Question:
    """The question, read once: a caller holding only its text gets the cached reading."""
    return read_question(question) if isinstance(question, str) else question


WH_WORDS = ("what", "when", "where", "which", "who", "whom", "whose", "why", "how")


def _spelt(text: str) -> str:
    """A casual question's misspelt wh-word put right ("wat time …", "wen does …"), so it is
    read for what it asks; an auxiliary opening ("Were …") is a yes/no question as written."""
    words = text.split(maxsplit=1)
    if not words:
        return text
    first = words[0].strip("\"'“‘").lower()
    close = difflib.get_close_matches(first, WH_WORDS, n=1, cutoff=0.75)
    if not close or first in WH_WORDS or read(text).words[0].pos == "AUX":
        return text
    return " ".join([close[0], *words[1:]])


def _asked(
    reading: Reading, wh: Word
) -> tuple[Kind, frozenset[str], tuple[str, ...], set[str], int]:
    """Kind, expected types, dimensions, kind nouns and where the opening ends, from the
    wh-word and what it governs."""
    words = reading.words
    after = words[wh.i + 1] if wh.i + 1 < len(words) else None
    if wh.lemma == "how" and after is not None:
        if after.lemma in ("many", "much"):
            counted = words[after.head] if after.dep == "amod" else None
            kinds = {STEM(counted.lemma)} if counted is not None and counted.i != after.i else set()
            if after.lemma == "many":
                return "count", frozenset({"count"}), (), kinds, after.end
            # "How much does it cost?" asks a price; "How much is a day rover?" a price or an
            # amount; "How much lamb …?" an amount.
            money = any(w.lemma in MONEY_WORDS for w in words)
            counted_noun = bool(kinds)
            expects = frozenset(
                {"money"} if money else {"quantity"} if counted_noun else {"money", "quantity"}
            )
            return "measure", expects, (), kinds, after.end
        measured = HOW_MEASURES.get(after.lemma)
        if measured:
            expects = frozenset({"time"} if measured == ("time",) else {"quantity"})
            if "frequency" in measured:
                expects = frozenset({"frequency"})
            return "measure", expects, measured, set(), after.end
        return "factoid", frozenset(), (), set(), wh.end
    if wh.lemma in _WH_TYPES:
        return "factoid", _WH_TYPES[wh.lemma], (), set(), wh.end
    # "what/which <noun>": the noun names the answer's type or its kind of thing.
    noun = _asked_noun(reading, wh)
    if noun is None:
        # "What does a room … cost per night?", however the parser tags "cost"
        priced = any(w.lemma in MONEY_VERBS for w in words[wh.i + 1 :])
        return "factoid", frozenset({"money"} if priced else set()), (), set(), wh.end
    of = [c for p in reading.children(noun.i) if p.lemma == "of" for c in reading.children(p.i)]
    if noun.lemma in ("kind", "type", "sort") and of:  # "what kind of bird"
        return "factoid", frozenset(), (), {STEM(of[0].lemma)}, of[0].end
    typed = TYPE_NOUNS.get(noun.lemma) or (ATTRIBUTE_KIND.get(noun.attribute or ""))  # "what stone"
    if not typed and names_a_property(noun.lemma):  # "What's the strength of …?": "4.2%"
        return "factoid", frozenset({"quantity", "share"}), (), set(), noun.end
    kinds = set() if noun.lemma in ATTRIBUTE_NOUNS else {STEM(noun.lemma)}
    return "factoid", frozenset({typed} if typed else set()), (), kinds, noun.end


def _asked_noun(reading: Reading, wh: Word) -> Word | None:
    """The noun a "what"/"which" determines: its head, or the noun right after it where the
    parser hung "which" elsewhere ("In which town …" read as "in which", then "town"), or the
    property it is said to be ("What is the strength of …?"; a type noun is not read so: "What
    is the phone number …?" asks no count)."""
    if wh.dep == "det":
        return reading.words[wh.head]
    root = reading.words[wh.head]
    if wh.lemma == "what" and root.lemma == "be":  # "What is the strength of …?"
        said = [c for c in reading.children(root.i) if c.dep in ("nsubj", "attr") and c != wh]
        if said and said[0].lemma not in TYPE_NOUNS and names_a_property(said[0].lemma):
            return said[0]
    after = reading.words[wh.i + 1] if wh.i + 1 < len(reading.words) else None
    if wh.lemma in ("what", "which") and after is not None and after.pos == "NOUN":
        return after
    return None


def _what_it_names(reading: Reading, wh: Word) -> frozenset[str]:
    """ "What is the roof made of?" asks a material, "What is it called?" a name."""
    lemmas = [word.lemma for word in reading.words if word.i > wh.i]
    if "make" in lemmas and any(w.text.lower() in ("of", "from") for w in reading.words):
        return frozenset({"material"})
    if "call" in lemmas or ("name" in lemmas and "of" in lemmas):
        return frozenset({"name"})
    return frozenset()


def _compared(reading: Reading) -> tuple[str, str] | None:
    """ "more than three ducks" -> ("more", "3")."""
    lowers = [word.text.lower() for word in reading.words]
    for word in reading.words:
        if word.number is None:
            continue
        for before, comparison in _COMPARISONS.items():
            if tuple(lowers[max(0, word.i - len(before)) : word.i]) == before:
                return comparison, word.number
    return None


def _choices(reading: Reading) -> tuple[frozenset[str], ...]:
    """The things a choice offers ("…, the Compass Hotel or the granary?"), as the stems of
    their content words: the phrases "or" joins, else the names it lists, else the attributes
    ("red or blue"); none for other questions."""
    joins = [word for word in reading.words if word.text.lower() == "or" and word.dep == "cc"]
    if not joins:
        return ()
    for join in joins:
        head = reading.words[join.head]
        others = [c for c in reading.children(head.i) if c.dep == "conj"]
        head = _offering(reading, head, others)
        if head.pos in ("NOUN", "PROPN") and others:
            inner = {w.i for other in others for w in reading.subtree(other.i)} | {join.i}
            phrases = [[w for w in reading.subtree(head.i) if w.i not in inner]]
            phrases += [reading.subtree(other.i) for other in others]
            offered = [frozenset(STEM(w.lemma) for w in p if _offered(w)) for p in phrases]
            if all(len(option) == 1 for option in offered[1:]) and _offered(head):
                # One-word options: what precedes the first is the thing they are said of
                # ("the plough's beam ash or oak" offers ash and oak).
                offered[0] = frozenset({STEM(head.lemma)})
            if all(offered) and len(set(offered)) == len(offered):
                return tuple(offered)
    spans = reading.name_spans()
    named = [{STEM(w.lemma) for w in reading.words[a:b] if w.text[:1].isupper()} for a, b in spans]
    named = [frozenset(name) for name in named if name]
    if len(named) > 1:
        return tuple(named)
    offered = [frozenset({w.attribute}) for w in reading.words if w.attribute]
    return tuple(offered) if len(offered) > 1 else ()


def _offering(reading: Reading, head: Word, others: list[Word]) -> Word:
    """The phrase an option with an article is set against where the word the parser joined
    it to has none: in "the new wall at Trevose or the old quay" the wall is offered, not
    Trevose; "held at Tavistead or Dunmere" and "at the mill or the barn" offer places."""
    held_by = reading.words[reading.words[head.head].head] if head.dep == "pobj" else None
    if held_by is None or held_by.pos not in ("NOUN", "PROPN") or not others:
        return head
    articled = [any(c.dep == "det" for c in reading.children(w.i)) for w in (head, *others)]
    return held_by if not articled[0] and all(articled[1:]) else head


def _offered(word: Word) -> bool:
    """A word naming an option: not "older" in "Which is older, the inn or …", which the
    parser may hang on the first option."""
    return word.content and word.tag not in ("JJR", "JJS", "RBR", "RBS")


def _topic(reading: Reading, wh: Word | None, kind: Kind) -> str:
    """What the question asks about, as written: an open request's thing ("the Wherry Inn"),
    else the noun phrase that is its subject or object and not the wh-phrase or the kind
    asked for, with its "of …" attachments ("the pulpit of St Ives chapel")."""
    if kind == "open":
        return _open_topic(reading)
    asked = set() if wh is None else {wh.i, wh.head}
    if wh is not None and (noun := _asked_noun(reading, wh)) is not None:
        asked.add(noun.i)
    phrases = [
        phrase
        for phrase in reading.phrases
        if not asked & set(range(phrase.start, phrase.end))
        and reading.words[phrase.head].pos != "PRON"
        and reading.words[phrase.head].lemma not in ATTRIBUTE_NOUNS
        # not a phrase describing another noun: "the sign saying double parking is prohibited"
        and not any(
            reading.words[i].dep in ("acl", "relcl") for i in reading.ancestors(phrase.head)
        )
    ]
    if not phrases:
        return reading.text
    order = {"nsubj": 0, "nsubjpass": 0, "dobj": 1, "attr": 2, "pobj": 3}
    best = min(phrases, key=lambda p: (order.get(reading.words[p.head].dep, 4), p.start))
    end = best.end  # with what is attached to it: "the lamps at the Candle Fair"
    for prep in reading.children(best.head):
        if prep.dep == "prep" and prep.i == end:
            end = reading.subtree(prep.i)[-1].i + 1
    return reading.span_text(best.start, end)


def _relation(reading: Reading, after: int, kind: Kind, expects: frozenset[str]) -> frozenset[str]:
    """What a typed question asks of its thing: the stems of its verbs after the opening
    ("owns", "designed", "carved"), and the role a "who is" question names ("Who is the priest
    …?"). The answer type alone (any person, any number) says nothing of it, so an answer must
    state it: Jowan Tallack who built the inn does not answer "Who owns the inn?". Open
    requests, yes/no questions and choices have none, nor a question of a colour, shape or
    material, which its value says ("What colours is the boat painted?": "the green boat")."""
    attributes = frozenset(ATTRIBUTE_KIND.values())
    if kind in ("open", "yes_no", "choice") or after == 0 or (expects and expects <= attributes):
        return frozenset()
    verbs = {  # what it asks, not what describes its thing ("the shop painted green")
        w
        for w in reading.words
        if w.start >= after
        and (w.pos == "VERB" or _verb_by_place(reading, w))
        and not any(reading.words[i].dep in ("acl", "relcl") for i in reading.ancestors(w.i))
        # "known for" asserts what a thing is known for; "known as" only names it
        and ((w.content and w.dep not in ("acl", "amod")) or w.lemma == "know")
    }
    roles = set()
    if expects & {"person"}:
        roots = [w for w in reading.words if w.dep == "ROOT" and w.pos == "AUX"]
        roles = {
            child
            for root in roots
            for child in reading.children(root.i)
            if child.dep in ("attr", "nsubj") and child.pos == "NOUN" and child.content
        }
    # "come from": the preposition, where the verb says nothing more; its first ("put in …
    # before using it" is put in)
    light = {w for w in verbs if w.lemma in LIGHT_VERBS}
    firsts = (
        next((c for c in reading.children(w.i) if c.dep in ("prep", "prt")), None) for w in light
    )
    preps = {prep for prep in firsts if prep is not None}
    asked = (verbs - light if preps else verbs) | roles | preps
    return frozenset(STEM(word.lemma) for word in asked)


def _request_end(reading: Reading, request: Word) -> int:
    """Where a request's asking words end: "Can you tell me about", "Describe"."""
    end = request.end
    for word in reading.words[request.i + 1 :]:
        if word.dep not in ("dative", "prep", "dobj") or word.pos not in ("PRON", "ADP"):
            break
        end = word.end
    return end


def _verb_by_place(reading: Reading, word: Word) -> bool:
    """A root the small tagger took for another part of speech though an auxiliary governs
    it: "When did the cafe close?" ("close" read as an adverb)."""
    return word.dep == "ROOT" and any(c.dep == "aux" for c in reading.children(word.i))


def _request(reading: Reading) -> Word | None:
    """The verb of a request ("Tell me about …", "Describe …", "Can you tell me …", "What do
    you know about …"): a root verb with no subject but its listener. A question that opens
    with "how", "what" or "which" asks its own thing ("How many steps do you climb …?")."""
    opening = next((word for word in reading.words if word.text[0].isalnum()), None)
    if opening is not None and opening.tag in WH_TAGS:
        return None
    for word in reading.words:
        if word.dep != "ROOT" or word.pos != "VERB":
            continue
        subjects = [c for c in reading.children(word.i) if c.dep in SUBJECTS]
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


def _looks(reading: Reading) -> Word | None:
    """The thing of "What does the Wexley Bridge look like?", a request to describe it."""
    for word in reading.words:
        if word.lemma == "look" and any(c.text.lower() == "like" for c in reading.children(word.i)):
            return next((c for c in reading.children(word.i) if c.dep in SUBJECTS), None)
    return None


def _as_request(question: str) -> Reading:
    """The reading in which a request is seen: spaCy's small model takes a capitalised verb
    that opens a line of names for one more name ("Describe Tregarrick Point Lighthouse"), so
    a question with no request is read again with its first letter in lower case."""
    reading = read(question)
    opening = reading.words[0] if reading.words else None
    if _request(reading) is None and opening is not None and opening.pos == "PROPN":
        again = read(question[:1].lower() + question[1:])
        if _request(again) is not None:
            return again
    return reading


def _appearance(reading: Reading) -> bool:
    request = _request(reading)
    return _looks(reading) is not None or (request is not None and request.lemma == "describe")


def _objects(reading: Reading, word: Word) -> list[Word]:
    """The things a word is said of: its objects, not pronouns ("me", "what")."""
    return [
        child
        for child in reading.children(word.i)
        if child.dep in ("pobj", "dobj") and child.pos != "PRON" and child.tag not in WH_TAGS
    ]


def _open_topic(reading: Reading) -> str:
    """What an open request asks about ("the Wherry Inn"), or the whole question; "some facts
    about the Morwen Tower" is about the Morwen Tower."""
    about, request = _about(reading), _request(reading)
    heads = _objects(reading, about) if about else []
    if not heads and (looked := _looks(reading)) is not None:
        heads = [looked]
    if not heads and request is not None:
        preps = [c for c in reading.children(request.i) if c.dep == "prep"]
        heads = _objects(reading, request) + [o for p in preps for o in _objects(reading, p)]
    if not heads:
        return reading.text
    head = heads[0]
    inner = [c for c in reading.children(head.i) if c.dep == "prep" and c.text.lower() == "about"]
    if inner and _objects(reading, inner[0]):
        head = _objects(reading, inner[0])[0]
    words = reading.subtree(head.i)
    # The tagger may hang a place on the request, not on its thing: "Describe [the pond] [in
    # Queen Adela Gardens]" asks about the pond in Queen Adela Gardens.
    hung = [] if request is None else reading.children(request.i)
    for prep in hung:
        if prep.dep == "prep" and prep.i == words[-1].i + 1 and prep.text.lower() != "about":
            words = [*words, *reading.subtree(prep.i)]
    return reading.text[words[0].start : words[-1].end]
