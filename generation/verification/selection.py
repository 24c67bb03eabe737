"""Which statement answers a question: the one that gives what it asks, of the thing it asks
about, chosen by a score whose weights were fitted on data, not by a ladder of sentence shapes.

Every statement of the given sources (`statements`) is a candidate. Each is described by a few
features of what it gives the question (`FEATURES`): whether it holds a fact of the type the
question expects (a time, a date, money, a quantity in the asked dimension, a count, a person,
a place, a colour …) that the question does not already hold, whether that fact is said of the
question's topic and not of another thing in the same sentence, how much of the topic, names
and words of the question it says (with what it is about: a pronoun's referent, its source's
title), and whether it says the asked relation. A logistic model over them gives the chance
that it answers; its weights and the threshold under which the question is declined were
fitted on a development set (`bench/fit_selection.py`, figures in docs/BENCHMARKS.md). A
yes/no question is answered by the best statement that gives a verdict, after it; a choice by
the one that names one of its options.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from mmrag.generation.reading.question import Question, with_synonyms
from mmrag.generation.reading.text import STEM, SUBJECTS, Reading, Terms, Word, read
from mmrag.generation.reading.words import (
    AT_A_PLACE,
    ATTRIBUTE_KIND,
    CURRENCY,
    ENTITY_TYPES,
    FIRST_PERSON,
    FREQUENCY,
    KIND_LABELS,
    MONTHS,
    OPPOSITE_STATES,
    TYPE_NOUNS,
    UNIT_DIMENSION,
    WEEKDAYS,
    WHEN_ASKED,
)
from mmrag.generation.types import SourceLike
from mmrag.generation.verification.attributes import bound_attributes, head_noun
from mmrag.generation.verification.statements import (
    Statement,
    evidence_text,
    lower_article,
    statements,
)

Verdict = Literal["yes", "no"]
FEATURES = (  # each in [0, 1], 1 where the statement is the better answer for it
    "bias",
    "gives_type",  # holds a fact of an expected type the question does not (any new fact for
    # a question that asks for no type)
    "type_of_topic",  # and says it of the topic, not of another thing
    "names_kind",  # says the kind of thing asked for ("street", "kayaks"), where one is
    "topic",  # share of the topic's words it says (with what it is about)
    "names",  # share of the question's names it says (with what it is about)
    "relation",  # says what is asked of the thing ("carved"), where something is
    "fact_relation",  # its fact is not said by another verb ("opened in 1983" for "close")
    "words",  # share of the question's content words it says
    "new",  # says something the question does not
    "untyped",  # the question asks for no type
    "open_subject",  # an open request's thing is its subject (1 for other questions)
    "open_defines",  # an open request: it says what the thing is (1 for other questions)
    "open_caption",  # an open request for a look: a photo's caption (1 for other questions)
    "given",  # from a source given to the model, not a runner-up
    "first",  # its source's first statement
    "as_written",  # a full sentence as written, not said of a photo or quoted
)
# Features enter the model as log(FLOOR + value): the chance of an answer is then a product
# of powers of them, so a statement that lacks one thing asked (the names, the relation)
# scores low however much else it has, which a sum of weights cannot express.
FLOOR = 0.05


def _opposed() -> dict[str, frozenset[str]]:
    """Each state's stem with the stems of the states opposed to it ("close" for "open")."""
    found: dict[str, frozenset[str]] = {}
    for one, other in OPPOSITE_STATES:
        for mine, theirs in ((one, other), (other, one)):
            for word in mine:
                found[STEM(word)] = found.get(STEM(word), frozenset()) | {STEM(w) for w in theirs}
    return found


OPPOSITES = _opposed()
_TYPE_STEMS = frozenset(STEM(noun) for noun in TYPE_NOUNS)  # "time" of "What time …?"


@dataclass(frozen=True)
class Model:
    """A fitted logistic model: its weights (the first the bias) and its threshold."""

    weights: tuple[float, ...]
    threshold: float
    log_scaled: bool = True  # features enter as log(FLOOR + value)

    def probability(self, values: Sequence[float]) -> float:
        scaled = [math.log(FLOOR + v) for v in values[1:]] if self.log_scaled else values[1:]
        z = sum(w * x for w, x in zip(self.weights, [1.0, *scaled], strict=True))
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


@functools.cache
def fitted(name: str) -> dict:
    """A fitted model's parameters (`weights.json`, written by the bench that fits it)."""
    text = resources.files("mmrag.generation.verification").joinpath("weights.json").read_text()
    return json.loads(text)[name]


def model() -> Model:
    found = fitted("selection")
    assert tuple(found["features"]) == FEATURES, "weights.json was fitted on other features"
    return Model(tuple(found["weights"]), found["threshold"])


@dataclass(frozen=True)
class Choice:
    statement: Statement
    score: float
    said: str  # the answer: the statement as a full sentence, after "Yes," or "No," if asked


def choose(
    question: Question, sources: Sequence[SourceLike], *, given: int | None = None
) -> Choice | None:
    """The statement that best answers, if its score clears the fitted threshold. Sources past
    the first `given` (the model's) are runners-up, retrieved but not selected."""
    given = len(sources) if given is None else given
    scorer = model()
    yes_no = question.kind == "yes_no"  # a verdict the sources gainsay is no answer
    settled = source_verdict(question, [evidence_text(s) for s in sources]) if yes_no else None
    best: tuple[bool, float, int, Choice] | None = None
    for order, statement in enumerate(statements(sources)):
        answer = verdict(question, statement.text, statement.context) if yes_no else None
        if not eligible(question, statement) or (answer and settled not in (None, answer)):
            continue
        said = statement.said
        if answer is not None:
            said = f"{answer.capitalize()}, {lower_article(said)}"
        score = scorer.probability(
            features(question, statement, runner_up=statement.number > given)
        )
        # A verdict answers a yes/no question before a statement that only says what it asks
        # of ("Dogs £1.50 each way" for "Do dogs travel free?"), quoted with no yes or no.
        rank = (answer is not None or not yes_no, score, -order)
        if score >= scorer.threshold and (best is None or rank > best[:3]):
            best = (*rank, Choice(statement, score, said))
    return None if best is None else best[3]


def eligible(question: Question, statement: Statement) -> bool:
    """Whether a statement can answer at all: a question of one year, only from a source that
    says that year; a choice's names an option and says more, or the asked comparative ("BEST
    BITTER." or "The footbridge opened" is no answer to which is stronger or longer); a yes/no
    question's gives a verdict, or else says a word of the question beyond its names and its
    source's title, and not as a name ("Dogs £1.50" for "Do dogs travel free?"; "Heat the oven
    to 170°C" says nothing to "Can it be frozen?")."""
    asked_years = _years(question.terms.numbers)
    if asked_years and not asked_years & _years(_every_word(statement.context)):
        return False
    if question.kind == "choice":
        new = statement.reading.terms.words - question.terms.words
        compares = {d.lemma for d in statement.reading.degrees} & question.comparatives
        says = compares if question.comparatives else new
        return bool(says) and picks_one(question, statement.named or statement.text)
    if question.kind == "yes_no" and verdict(question, statement.text, statement.context) is None:
        words = statement.reading.words
        own = with_synonyms(frozenset(STEM(w.lemma) for w in words if w.content and not w.proper))
        title = read(statement.source.title).terms.words
        wanted = question.terms.words - _asking(question) - question.terms.names - title
        return bool(wanted & own or _misspelt(wanted - own, own))
    return True


def features(question: Question, statement: Statement, *, runner_up: bool = False) -> list[float]:
    """The statement's `FEATURES` for the question."""
    reading = statement.reading
    asked, said = question.terms, reading.terms
    about = _about(statement)
    # "across" for "cross"; "the bridge" for the footbridge asked about
    stated = states(reading)
    held = _naming(with_synonyms(said.words | about) | stated, question.topic_head)
    held |= _misspelt(asked.words - held, held) | question.said_otherwise(held)
    # A line with no verb (a label, a timetable row) cannot say the asked verb, nor another;
    # but who owns or runs a thing is said in words ("Owner: …"), never by a line of hours.
    verbless = not any(word.pos == "VERB" and word.dep != "amod" for word in reading.words)
    verbless = verbless and not question.expects & {"person", "organisation"}
    relations = stated | question.said_otherwise(stated)
    subject = _subject_words(question)
    # "Its parapets were raised …" names its thing as an owner, never as a fact of the asked type
    owner = len(statement.about) if statement.named.startswith(f"{statement.about}’s") else 0
    facts = [at for at in facts_given(question, reading) if reading.words[at].start >= owner]
    head = question.topic_head
    line = statement.source.modality == "text"  # a caption is about what its photo shows
    wanted = subject | asked.names
    of_topic = [
        at for at in facts if _said_of(reading, at, wanted, about, head, line, question.relation)
    ]
    untyped = not question.typed
    new = bool(said.words - asked.words)
    # the verdict or the option is the fact
    chooses = question.kind == "choice" or (
        question.kind == "yes_no"
        and verdict(question, statement.text, statement.context) is not None
    )
    open_request = question.kind == "open"
    kinds = with_synonyms(question.kinds)
    # "What contests …?": a thing of the asked kind is the fact an untyped question expects.
    # "What time …?" is named by the time given; "How many poles …?" not by "two people"
    typed_kind = bool(of_topic) and question.kinds <= _TYPE_STEMS
    names_kind = bool(kinds & with_synonyms(said.words)) or not question.kinds or typed_kind
    on_topic = not open_request or _topic_is_subject(question, reading, about)
    return [
        1.0,
        float(bool(facts) or chooses or (untyped and new and names_kind)),
        float(bool(of_topic) or chooses or untyped),
        float(names_kind),
        _share(subject, held),
        _share(asked.names, held | _every_word(statement.context)),
        _share(_roles(question) if verbless else question.relation, relations),
        float(not facts or any(_by_the_asked_verb(question, reading, at) for at in facts)),
        _share(asked.words - _asking(question), held),
        float(new),
        float(untyped),
        float(on_topic),
        float(not open_request or _defines(reading)),
        float(not (open_request and question.appearance) or statement.source.modality == "image"),
        float(not runner_up),
        float(statement.position == 0),
        float(statement.said == statement.text),
    ]


def _about(statement: Statement) -> frozenset[str]:
    """What a statement is about: its thing, its source's title and a photo's own text (the
    sign a caption places on Cooper Lane reads "DOUBLE PARKING PROHIBITED")."""
    seen = getattr(statement.source, "ocr_text", None) or ""
    titled = read(statement.about).terms.words | read(statement.source.title).terms.words
    return titled | read(seen).terms.words


def states(reading: Reading) -> frozenset[str]:
    """The relations a sentence says (stems, with their synonyms): its words, but not those
    that only name a kind of thing ("fishing" in "the fishing boat Kittiwake" says nothing of
    what the Kittiwake fishes for); a person's title is said of them ("the architect Lavinia
    Pendell"), a past participle of its noun ("six moored dinghies" are moored)."""
    said = {
        STEM(w.lemma)
        for w in reading.words
        if w.dep not in ("compound", "amod")
        or reading.words[w.head].pos == "PROPN"
        or w.tag == "VBN"
    }
    return with_synonyms(frozenset(said))


def _by_the_asked_verb(question: Question, reading: Reading, at: int) -> bool:
    """Whether the verb a fact hangs on is the one asked ("closed in 1983" for "When did the
    cafe close?"), or there is none to say otherwise (a label's line, no verb asked)."""
    path = []  # the words from the fact up to its verb: "carries … across the River Wend"
    for i in reading.ancestors(at):
        path.append(reading.words[i])
        if reading.words[i].pos == "VERB":
            break
    if not question.relation or not any(w.pos == "VERB" for w in path):
        return True
    return bool(with_synonyms(frozenset(STEM(w.lemma) for w in path)) & question.relation)


def _roles(question: Question) -> frozenset[str]:
    """The asked relations a line with no verb can still say: the role a "who is" question
    names ("Mayor: …" for "Who is the mayor …?"), not a verb it has no place for."""
    nouns = {STEM(w.lemma) for w in question.reading.words if w.pos in ("NOUN", "PROPN")}
    return question.relation & frozenset(nouns)


@functools.lru_cache(maxsize=16)  # a pool's sources, not more: a page's words are many
def _every_word(text: str) -> frozenset[str]:
    """A text's words and stems, whatever the tagger made of them: the "Plus" of "Corliss R3
    Plus" is a name in a question and a conjunction in a spec sheet's title. Cached: every
    statement of a source asks it of the same whole text."""
    reading = read(text)
    spelt = {w.text.lower() for w in reading.words if w.text[:1].isalnum()}
    return reading.terms.words | spelt | {STEM(word) for word in spelt}


def _years(numbers: frozenset[str]) -> frozenset[str]:
    return frozenset(n for n in numbers if n.isdigit() and len(n) == 4 and 1000 <= int(n) <= 2100)


def _misspelt(wanted: frozenset[str], held: frozenset[str]) -> frozenset[str]:
    """The question's words a statement says spelt otherwise: a casual "resevoir" is the
    source's "reservoir" (a letter left out or doubled in a word of six or more; "steam" is
    not "stream")."""
    long = [word for word in held if len(word) >= 6]
    return frozenset(
        word
        for word in wanted
        if len(word) >= 6 and difflib.get_close_matches(word, long, n=1, cutoff=0.9)
    )


def _share(wanted: frozenset[str], held: frozenset[str]) -> float:
    return len(wanted & held) / len(wanted) if wanted else 1.0


def _asking(question: Question) -> frozenset[str]:
    """The question's words that only ask ("kind", "time", "tall"; an open request's words
    beside its thing: "look" in "What does … look like?"): no answer need say them."""
    asking = {STEM(w.lemma) for w in question.reading.words if w.end <= question.opening_end}
    if question.kind == "open":
        asking |= question.terms.words - question.topic_terms.words
    return frozenset(asking) | question.kinds | {STEM(word) for word in WHEN_ASKED}


def _subject_words(question: Question) -> frozenset[str]:
    """The stems of what the question is about, less the facts a yes/no question asks of it."""
    topic = question.topic_terms
    return topic.words - topic.attributes - topic.numbers - _asking(question)


def facts_given(question: Question, reading: Reading) -> list[int]:
    """Where the statement gives a fact of a type the question expects and does not hold:
    the word at which each such fact stands."""
    found: list[int] = []
    expects = set(question.expects)
    if question.kind == "count":
        expects.add("count")
    for start, end, label in reading.entities:
        kind = ENTITY_TYPES.get(label)
        words = reading.words[start:end]
        since = start > 0 and reading.words[start - 1].lemma == "since"
        of_kind = _of_kind(question, reading, start, end, label)
        if kind in ("person", "organisation") and start > 0:  # "at Skerrow Point" is a place
            of_kind = of_kind and reading.words[start - 1].text.lower() not in AT_A_PLACE
        if kind == "quantity" and _other_dimension(question, reading, words[0].sentence):
            continue
        if label == "ORDINAL" and question.kind == "count":  # "first" says no how many
            continue
        if kind and _new(words, question) and _fits(kind, words, question, since) and of_kind:
            found.append(start)
    # A count is no day of a date ("23" of "23 March" for "How many engines …?").
    days = MONTHS | WEEKDAYS if expects == {"count"} else frozenset()
    calendar = {w.i for w in reading.words if reading.words[w.head].lemma in days}
    for word in reading.words:
        reason = "reason" in expects and reading.gives_reason(word.i)
        if reason or ("frequency" in expects and word.lemma in FREQUENCY):
            found.append(word.i)  # "every", "because": function words that give the fact
            continue
        if word.i in found or word.i in calendar or not _new([word], question):
            continue
        number = word.number is not None and _number_fits(word, reading, question, expects)
        attribute = bool(word.attribute) and ATTRIBUTE_KIND[word.attribute] in expects
        if number or (attribute and _attribute_of_topic(question, reading, word)):
            found.append(word.i)
    found += [at for at in _named_facts(question, reading, expects) if at not in found]
    return sorted(found)


def _of_kind(question: Question, reading: Reading, start: int, end: int, label: str) -> bool:
    """Whether a named thing is of the kind of place asked ("Which river …?"): its label is the
    kind's, or it or the word before it names the kind ("the River Wend", "Lake Ista")."""
    labels = {label for noun, label in KIND_LABELS.items() if STEM(noun) in question.kinds}
    named = {STEM(w.lemma) for w in reading.words[max(start - 1, 0) : end]}
    return not labels or label in labels or bool(named & question.kinds)


def _new(words: Sequence[Word], question: Question) -> bool:
    """Whether the words say something the question does not, a name run together on a sign
    ("LITTLEBITTERN" for the Little Bittern) being the question's own; a number of a name
    ("the Pelham Ridge 2") is no fact the question holds ("two poles" is new)."""
    said = {w.number or w.attribute or STEM(w.lemma) for w in words if w.content or w.number}
    asked = question.reading.words
    named = {w.number for w in asked[1:] if w.number and asked[w.i - 1].pos == "PROPN"}
    if not said - (question.terms.words - named):
        return False
    run_together = "".join(w.text.lower() for w in words if w.text.isalnum())
    return not (len(run_together) >= 4 and run_together in question.squeezed)


def _fits(kind: str, words: Sequence[Word], question: Question, since: bool = False) -> bool:
    """An entity of this type answers the question's expected types: a DATE for "when", a
    TIME for "what time" or a duration for "how long", MONEY for "how much does it cost"."""
    units = {UNIT_DIMENSION.get(w.unit or "", "") for w in words}
    if kind in ("date", "time") and "duration" in question.measures:
        return "duration" in units or (since and bool(question.relation))  # "held since 1599"
    if kind in ("date", "time") and "frequency" in question.expects:
        return any(w.lemma in FREQUENCY for w in words)
    if kind == "quantity" and question.measures:
        return bool(units & set(question.measures))
    if kind == "count":
        return question.kind == "count" or "count" in question.expects
    if kind == "date" and question.expects == {"time"}:  # "last 22:10", tagged a date
        return any(w.number and ":" in w.number for w in words)
    return kind in question.expects


def _other_dimension(question: Question, reading: Reading, sentence: int) -> bool:
    """Whether a measure in this sentence is said to be of another dimension than the one
    asked: "1.5 metres wide" or "96 metres … longer" for "How high …?"."""
    stated = reading.dimensions(sentence)
    return question.dimension is not None and bool(stated) and question.dimension not in stated


def _number_fits(word: Word, reading: Reading, question: Question, expects: set[str]) -> bool:
    """A number of the expected type: in the asked dimension's unit ("29°C", "40 minutes"), a
    price, a year or a clock time, a bare count; an age is a bare number ("Morwenna, 24")."""
    dimension = UNIT_DIMENSION.get(word.unit or "")
    before = reading.words[word.i - 1].text.lower() if word.i else ""
    after = reading.words[word.i + 1].text.lower() if word.i + 1 < len(reading.words) else ""
    year = word.number[:4].isdigit() and 1000 <= int(word.number[:4]) <= 2100  # "1890s" too
    if question.measures:
        # "held since 1599" says how long it has been held, where a verb is asked
        since = "duration" in question.measures and before == "since" and year
        since = since and bool(question.relation)
        age = "age" in question.measures and dimension is None
        # "wide" or "across" beside it makes a length a width, not 1 hr 45 min
        spatial = dimension in (None, "length", "size")
        return not (spatial and _other_dimension(question, reading, word.sentence)) and (
            dimension in question.measures or since or age or ("date" in question.measures and year)
        )
    if "money" in expects:
        return before in CURRENCY or after in CURRENCY
    if expects & {"date", "time"}:
        clock = _clock(word, before, after)
        return clock if expects == {"time"} else clock or year
    if "quantity" in expects:
        return dimension is not None
    if dimension in expects:  # "What oven temperature …?": "170°C"
        return True
    count = dimension is None and before not in CURRENCY and not _clock(word, before, after)
    return "count" in expects and count


# "9am", "4.30pm", and a timetable's "10.30": hours, a dot and minutes, no unit, no currency
_CLOCK_WRITTEN = re.compile(r"(?:[01]?\d|2[0-4])(?:[.:][0-5]\d)?[ap]m|(?:[01]?\d|2[0-4])\.[0-5]\d")


def _clock(word: Word, before: str, after: str) -> bool:
    """A number that is a time of day where a time is asked: "06:50", "at 9", "9 a.m.", "9am",
    a timetable's "10.30" ("10.30" is a decimal elsewhere)."""
    hour = word.number.isdigit() and int(word.number) <= 24 and before in ("at", "from")
    if ":" in word.number or hour or after in ("am", "pm", "a.m.", "p.m.", "o'clock"):
        return True
    written = _CLOCK_WRITTEN.fullmatch(word.text.lower())
    return bool(written) and not (word.unit or before in CURRENCY)


def _attribute_of_topic(question: Question, reading: Reading, word: Word) -> bool:
    """A colour or material said of the thing asked about ("What colour is the sail?" is not
    answered by the hull's green in "a green hull and a white sail"); shapes of anything."""
    kind = ATTRIBUTE_KIND[word.attribute]
    head = head_noun(question.reading, question.opening_end, kind)
    if kind not in ("colour", "material") or head is None:
        return True
    # The head, and a noun it ends with: "floodwater" is water.
    nouns = {STEM(w.lemma) for w in reading.words if w.pos == "NOUN"}
    heads = with_synonyms(frozenset({head, *(n for n in nouns if head.endswith(n))}))
    bound = bound_attributes(reading.text, heads, kind)
    return word.attribute in bound or not any(
        bound_attributes(reading.text, frozenset({STEM(w.lemma)}), kind)
        for w in reading.words
        if w.pos == "NOUN" and w.i != word.i
    )


def _named_facts(question: Question, reading: Reading, expects: set[str]) -> list[int]:
    """Names that give a person, an organisation, a place or a name: a doer after "by" or a
    sentence's named subject, a name after a preposition of place, any new name for "name"."""
    if not expects & {"person", "organisation", "place", "name"}:
        return []
    asked = question.terms.words
    found = []
    for start, end in reading.name_spans():
        words = [w for w in reading.words[start:end] if w.proper]
        label = next((lab for s, e, lab in reading.entities if s <= start < e), "")
        # "AT ALL TIMES" names no place; "Thu-Mon" no one
        timely = label in ("DATE", "TIME")
        timely = timely or any(TYPE_NOUNS.get(w.lemma.lower()) in ("date", "time") for w in words)
        if not words or not _new(words, question) or timely:
            continue
        before = [
            w.text.lower()
            for w in reading.words[max(0, start - 2) : start]
            if w.text.lower() != "the"
        ]
        doer = before[-1:] == ["by"] or any(w.dep in SUBJECTS for w in words)
        placed = before[-1:] and before[-1] in AT_A_PLACE
        placed = placed and _of_kind(question, reading, start, end, label)
        person = bool(expects & {"person", "organisation"}) and doer
        if "name" in expects or person or ("place" in expects and placed):
            found.append(words[0].i)
    if "place" in expects:  # a place that is no name: "in the pole bag", "on narrow ledges"
        found += [
            w.i
            for w in reading.words
            if w.dep == "pobj"
            and w.pos == "NOUN"
            and reading.words[w.head].text.lower() in AT_A_PLACE
            and STEM(w.lemma) not in asked
            and TYPE_NOUNS.get(w.lemma) not in ("date", "time")  # "at all times"
        ]
    return found


def _said_of(
    reading: Reading,
    at: int,
    subject: frozenset[str],
    about: frozenset[str],
    head: frozenset[str] = frozenset(),
    line: bool = False,
    asked: frozenset[str] = frozenset(),
) -> bool:
    """Whether the fact at `at` is said of the question's thing: the statement names the
    thing's `head` noun somewhere (an inn's builder is no name of the inn's cat), or is a
    `line` of a text with no subject (a timetable row, a recipe step) under a title that
    names the thing; and the subject of its clause is that thing, a word standing for it (a
    pronoun, what the statement is `about` where that names the thing), or there is none (a
    label's line, a caption), or the relation `asked` of it ("the average wait is 3 years");
    not another thing named beside it ("the south pier is 120 metres long" for the north pier).
    A caption is about what its photo shows: an inn's upper floor says nothing of its cat."""
    if not subject:
        return True
    chain = [at, *reading.ancestors(at)]
    said = _naming(with_synonyms(frozenset(STEM(w.lemma) for w in reading.words) | about), head)
    subjectless = not any(c.dep in SUBJECTS for above in chain for c in reading.children(above))
    if head and not head & said and not (line and subjectless and about & subject):
        return False
    for above in chain:
        # hung on the thing itself, or on a compound naming it: "Mill tour - 50 minutes, …"
        near = [reading.words[above]] if above != at else []
        near += [c for c in reading.children(above) if c.dep == "compound"]
        if any(STEM(word.lemma) in head for word in near) or reading.instructs(above):
            return True
        subjects = [c for c in reading.children(above) if c.dep in SUBJECTS]
        if not subjects:
            continue
        named = _naming(
            frozenset(STEM(w.lemma) for s in subjects for w in reading.subtree(s.i) if w.content),
            head,
        )
        # a pronoun subject; or the quoted speaker it is about, as "me": "takes me forty hours"
        speaker = bool(about & subject) and any(
            c.text.lower() in FIRST_PERSON for c in reading.children(above)
        )
        pronoun = speaker or any(s.pos == "PRON" for s in subjects)
        titled = not (named - about - head) and bool(about & subject)
        return pronoun or bool(named & (subject | head | asked)) or titled
    return True


def _naming(stems: frozenset[str], head: frozenset[str]) -> frozenset[str]:
    """The stems, with the topic's head where one of them is that compound's last part: "the
    bridge" names a footbridge, "the boat" a steamboat."""
    return stems | {h for h in head if any(len(s) > 3 and h.endswith(s) for s in stems)}


def _topic_is_subject(question: Question, reading: Reading, about: frozenset[str]) -> bool:
    """ "The Wherry Inn is an inn in Wetherley …" is about the Wherry Inn; "Visitors can climb
    194 steps to the top of the Morwen Tower" is about visitors; a line with no subject (a
    fact sheet's "Known for: oysters") is about what its source names (`about`)."""
    if not reading.subjects():  # a caption is about its head noun: an inn's floor is no inn
        root = next((w for w in reading.words if w.dep == "ROOT"), None)
        if root is not None and root.pos in ("NOUN", "PROPN"):
            return STEM(root.lemma) in question.topic_terms.words
        return question.topic_terms.words <= about
    for subject in reading.subjects():
        named = {STEM(word.lemma) for word in reading.subtree(subject.i)}
        if STEM(subject.lemma) in question.topic_head and question.topic_terms.words <= named:
            return True
    return False


def _defines(reading: Reading) -> bool:
    """ "X is a 48-metre tower …": a sentence saying what its subject is."""
    roots = [word for word in reading.words if word.dep == "ROOT" and word.lemma == "be"]
    return any(c.dep == "attr" for root in roots for c in reading.children(root.i))


def gives_what_is_asked(question: Question, text: str) -> bool:
    """Whether a text gives what a question asks of its thing: a fact of the expected type
    said of it, or one of a choice's options; any question that asks for no type, yes."""
    if question.kind == "choice":
        return picks_one(question, text)
    if not question.typed:
        return True
    reading = read(text)
    subject = _subject_words(question) | question.terms.names
    return any(_said_of(reading, at, subject, frozenset()) for at in facts_given(question, reading))


def picks_one(question: Question, text: str) -> bool:
    """Whether a text names one of a choice's options and not the others."""
    return picked(question, text) is not None


def picked(question: Question, text: str) -> frozenset[str] | None:
    """The one choice option a text names, the one it compares with ("more arches than the
    Wexley Bridge") not counted as named; None where it names none or several."""
    reading = read(text)
    than = next((w for w in reading.words if w.lemma == "than"), None)
    said = reading.terms.words if than is None else read(text[: than.start]).terms.words
    named = [option for option in question.choices if option <= said]
    return named[0] if len(named) == 1 else None


def verdict(question: Question, sentence: str, context: str = "") -> Verdict | None:
    """What a source sentence says to a yes/no question, or None where it says nothing: it
    must be about the question's thing (its names and its other words; `context`, all its
    source says, may name them); then it states the asked colour, shape, material or count
    (yes), or another of the same kind (no); "more than three" compares the counts. A question
    that asks no such fact ("Was the castle ever besieged?") is answered by the sentence that
    says what it asks: "no" if it denies it, or where it says it of a time that has ended ("was
    the largest … until 1962") and the question asks of now."""
    asked, said = question.terms, read(sentence).terms
    about = said.words | read(context).terms.words
    facts = asked.attributes | asked.numbers
    if asked.names - about:
        return None
    subject = asked.words - facts - _asking(question)
    about = with_synonyms(about)
    # a state is said by its opposite ("closed Tuesdays" for "open on Tuesdays"), but "open
    # daily, Easter to October" says nothing of "open in winter"
    if any(not OPPOSITES.get(word, frozenset()) & about for word in subject - about):
        return None
    if not facts:
        found = _denied_or_said(question, read(sentence))
    elif question.compared:
        found = _compare(question, read(sentence))
    else:
        found = _attribute_verdict(question, sentence, asked, said)
    if found == "yes" and question.now and read(sentence).former():
        return "no"
    return found


def source_verdict(question: Question, evidence: Sequence[str]) -> Verdict | None:
    """The verdict the evidence gives a yes/no question: where it asks of now, a sentence's
    that it no longer holds, read with all its source says ("Is it still the only crossing?":
    "It was the only crossing until 1934"), which "It crosses the Fowey" does not gainsay;
    else the first a sentence gives, in evidence order, read with its source's title."""
    said = [(s, text) for text in evidence for s in read(text).sentence_texts()]
    if question.now and any(read(s).former() and verdict(question, s, t) == "no" for s, t in said):
        return "no"
    titled = (verdict(question, s, read(t).sentence_texts()[0]) for s, t in said)
    return next(filter(None, titled), None)


def _attribute_verdict(
    question: Question, sentence: str, asked: Terms, said: Terms
) -> Verdict | None:
    kinds = {ATTRIBUTE_KIND[word] for word in asked.attributes}
    given = frozenset().union(*(_given(question, sentence, kind) for kind in kinds))
    if asked.attributes <= given and asked.numbers <= said.words:
        return "yes"
    if given - asked.attributes:
        return "no"
    asked_counts, said_counts = counts(question.reading), counts(read(sentence))
    if any(said_counts.get(noun, number) != number for noun, number in asked_counts.items()):
        return "no"
    return None


def _given(question: Question, sentence: str, kind: str) -> frozenset[str]:
    """The attributes of a kind the sentence gives the question's thing."""
    head = head_noun(question.reading, question.opening_end, kind)
    if kind in ("colour", "material") and head:
        return bound_attributes(sentence, with_synonyms(frozenset({head})), kind)
    return read(sentence).terms.of_kind(kind)


def counts(reading: Reading) -> dict[str, str]:
    """Counted things: "three red bands" -> {"band": "3"} (each number's noun), keyed by every
    synonym of the noun too ("2 bands" counts stripes)."""
    found: dict[str, str] = {}
    for word in reading.words:
        if word.number is not None and word.dep == "nummod":
            for noun in with_synonyms(frozenset({STEM(reading.words[word.head].lemma)})):
                found.setdefault(noun, word.number)
    return found


def _compare(question: Question, reading: Reading) -> Verdict | None:
    """The verdict on "more than N" and the like, from the sentence's count of the same noun."""
    assert question.compared is not None
    relation, limit = question.compared
    said = counts(reading)
    for noun in counts(question.reading):
        if noun in said:
            have, bound = float(said[noun]), float(limit)
            holds = {
                "more": have > bound,
                "fewer": have < bound,
                "at least": have >= bound,
                "at most": have <= bound,
            }[relation]
            return "yes" if holds else "no"
    return None


def _denied_or_said(question: Question, reading: Reading) -> Verdict | None:
    """The verdict of a sentence that says what a question asks (its verbs and adjectives,
    "besieged", "open"; for "Are there …?" the things): "no" where it denies it, "yes" where
    it says it; None where it does not say it."""
    asked = question.reading
    predicate = {
        STEM(w.lemma)
        for w in asked.words
        if w.content
        and w.i > 0
        and w.lemma not in WHEN_ASKED
        # what is said of the thing: a verb or adjective, or the noun it is said to be ("Is
        # it still the only crossing?")
        and (w.pos in ("VERB", "ADJ") or w.dep == "attr")
    }
    denied = any(w.dep == "neg" or (w.dep, w.text.lower()) == ("det", "no") for w in reading.words)
    if not predicate and any(word.dep == "expl" for word in asked.words):
        return "no" if denied else "yes"  # "Are there swans …?": the sentence about them says
    said = with_synonyms(frozenset(STEM(w.lemma) for w in reading.words))
    asked_verbs = {STEM(w.lemma) for w in asked.words if w.pos == "VERB"} & predicate
    missing = (predicate - _light() or predicate) - said  # "free to get in": "free" says it
    # an asked verb said as one, not as a word describing a thing: "Packed weight 2.4 kg" says
    # nothing of packing it wet
    missing |= asked_verbs - _light() - states(reading)
    opposed = {stem for stem in missing if OPPOSITES.get(stem, frozenset()) & said}  # "closed"
    if not predicate or missing - opposed:
        return None
    return "no" if denied != bool(opposed) else "yes"


@functools.cache
def _light() -> frozenset[str]:
    """Words that say next to nothing by themselves ("get", "make", "take"): spaCy's English
    stopwords (imported here, once spaCy is loaded, not on import)."""
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STEM(word) for word in STOP_WORDS)


def polarity(reading: Reading) -> Verdict:
    """What a yes/no answer says: "no" if it opens with "No" or denies something."""
    words = [word for word in reading.words if word.text[0].isalnum()]
    if words and words[0].text.lower() == "no":
        return "no"
    return "no" if any(word.dep == "neg" for word in words) else "yes"
