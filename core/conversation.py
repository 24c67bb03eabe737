"""A conversation's latest turn as a standalone question, for retrieval, selection and checking.

"How many windows does it have on the upper floor?" after a question about the Wherry Inn is a
question about the Wherry Inn; answered alone, it retrieved the Curlew Lodge's windows and cited
them. Every later stage needs the question a reader of the whole conversation would ask, so a
follow-up is resolved once, before retrieval, and the resolved question is returned with the
answer.

Two resolvers, chosen by the `rewrite` setting:

- `rules` (the offline default; no model needed): each turn is read through its `Reading`
  (spaCy's parts of speech, parse and entities), so a request's verb ("Tell me about",
  "Describe", "Show me"), a "Please", an "I'm …" or a "Thanks!" is never taken for a name. The
  topic is what a reader would carry: what an open request asks about, with its attachments
  ("the tram of Brackwater"); else the first thing the turn names ("the Wherry Inn", not the
  door of it; "the lighthouse of Wetherley" where the name is a bare place); else, when the
  question named nothing, what the answer named. It is carried into a follow-up that refers
  back ("it", "its", "they", "them", "their", a closing "there" for the place, "the same"),
  that continues ("And the roof?"), or that names nothing ("How many windows are on the upper
  floor?"); a follow-up that opens with "Thanks!" or "OK." is resolved past them. A question
  complete on its own is left exactly as it was: one that names its own thing before any word
  that refers back, one with a number (a date or a count of its own), or one that asks which
  thing of a kind ("Which lake is the deepest in the world?").
- `llm`: the generator rewrites the question from the conversation (LlamaIndex's
  condense-question mode), for models that can; the rules stand where its reply is unusable.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from mmrag.generation.citations import strip_markers
from mmrag.generation.engines.base import Engine
from mmrag.generation.prompts import rewrite_messages
from mmrag.generation.reading.question import read_question
from mmrag.generation.reading.text import Reading, Word, read
from mmrag.generation.reading.words import ATTRIBUTE_NOUNS
from mmrag.generation.types import Turn
from mmrag.runtime.deadline import check

RewriteMode = Literal["rules", "llm"]


class Resolver(Protocol):
    def resolve(self, turns: Sequence[Turn], question: str) -> str:
        """The question as it reads on its own, given the turns before it."""
        ...


# A boat is "she"; a possessive ("her hull") takes the topic's "'s", an object ("built her")
# the topic.
_BACK_REFERENCES = frozenset(
    {"it", "they", "them", "its", "their", "she", "her", "he", "him", "his"}
)
_POSSESSIVES = frozenset({"its", "their", "his"})
_CONTINUING = frozenset({"and", "also", "but"})
_WH_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})
# Quoted text: the words on a sign ("BREAD") are what it says, not what it is.
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”")
# The kinds of place a bare "the town" names when the conversation is in one; no library here
# says which nouns are places (spaCy tags names, not the nouns that stand for them).
_PLACE_KINDS = frozenset({"town", "city", "village", "province", "country", "region", "island"})


@dataclass(frozen=True)
class Topic:
    """What a follow-up refers back to ("the lighthouse of Wetherley"), and the place it names
    for a closing "there" ("Wetherley")."""

    phrase: str
    place: str


def _names(reading: Reading) -> list[tuple[int, int]]:
    return reading.name_spans(outside=[match.span() for match in _QUOTED.finditer(reading.text)])


def named_things(text: str) -> list[str]:
    """Names in the order they appear, each as written with its article ("the Wherry Inn",
    "Wetherley", "St. Wenna's Church")."""
    reading = read(text)
    return [reading.span_text(start, end) for start, end in _names(reading)]


def _lower(phrase: str) -> str:
    """Inside a sentence: "The Wherry Inn" -> "the Wherry Inn"."""
    return "the" + phrase[3:] if phrase.startswith("The ") else phrase


def topic_of(text: str) -> Topic | None:
    """What a turn is about, as a reader would carry it: an open request's topic with its
    attachments, else the first name it gives (with the thing it names, where it is a bare
    place: "the lighthouse of Wetherley"), else nothing."""
    reading = read(text)
    names = _names(reading)
    place = reading.span_text(*names[-1]) if names else ""
    request = read_question(text)
    if request.kind == "open" and (asked := request.topic) != text:
        inner = [read(asked).span_text(*span) for span in _names(read(asked))]
        return Topic(_lower(asked), inner[-1] if inner else _lower(asked))
    if not names:
        return None
    start, end = names[0]
    first = reading.words[start]
    owner = reading.words[first.head] if first.dep == "pobj" else None
    if first.text.lower() != "the" and owner is not None and owner.text.lower() == "of":
        thing = reading.words[owner.head]
        asked_for = thing.dep == "attr"  # "What is the capital of Ostravel?": the unknown
        if thing.pos == "NOUN" and not asked_for:  # "the lighthouse of Wetherley": a thing of it
            begin = min((w.i for w in reading.children(thing.i) if w.dep == "det"), default=thing.i)
            return Topic(_lower(reading.span_text(begin, end)), reading.span_text(start, end))
    name = reading.span_text(start, end)
    return Topic(_lower(name), _lower(place) or _lower(name))


def _question(text: str) -> tuple[str, str]:
    """A turn's question and what comes before it: "Thanks! How many rooms does it have?"
    asks "How many rooms does it have?" after "Thanks!"."""
    said = read(text).sentence_texts()
    if len(said) < 2:
        return "", text
    last = said[-1]
    return text[: text.rfind(last)].strip(), last


def _definite(reading: Reading) -> tuple[Word, Word] | None:
    """A question's first "the …" noun phrase: its "the" and its head ("door" in "the door of
    the Wherry Inn")."""
    for word in reading.words:
        if word.text.lower() == "the" and word.dep == "det" and word.head > word.i:
            return word, reading.words[word.head]
    return None


def _definite_phrase(reading: Reading) -> tuple[int, int] | None:
    """Where the first "the …" noun phrase of a question stands, in characters ("the door"
    of "the door of the Wherry Inn")."""
    found = _definite(reading)
    return None if found is None else (found[0].start, found[1].end)


def _with_topic(question: str, topic: str) -> str:
    """A question that leaves its subject out, made to name it: "of the Wherry Inn" after its
    first definite noun phrase, else after the whole question."""
    phrase = _definite_phrase(read(question))
    if phrase is None:
        return f"{question.rstrip(' ?.!')} of {topic}?"
    end = phrase[1]
    return f"{question[:end]} of {topic}{question[end:]}"


def _asks_which(reading: Reading) -> bool:
    """Whether a question asks which thing of a kind it names ("Which lake is the deepest
    in the world?"): complete on its own, unlike "What colour is …", which asks of one."""
    for word in reading.words:
        if word.tag == "WDT" and word.dep == "det":
            kind = reading.words[word.head]
            return kind.pos in ("NOUN", "PROPN") and kind.lemma not in ATTRIBUTE_NOUNS
    return False


# The most characters of a conversation a follow-up is resolved from: its latest turns, the
# last one cut to what is left. Read whole, 63 turns of 8,000 characters took 46-54 s to
# resolve and held an answer slot all along; a topic carried through a 50-turn chain of short
# questions and answers fits in it.
MAX_RESOLVE_CHARS = 6_000


def recent(turns: Sequence[Turn], budget: int = MAX_RESOLVE_CHARS) -> list[Turn]:
    """The latest turns whose text fits in `budget` characters, oldest first; the first that
    does not fit whole is kept cut to its end (where a turn's question is), from a word."""
    kept: list[Turn] = []
    for turn in reversed(turns):
        if len(turn.content) > budget:
            cut = turn.content[len(turn.content) - budget :]
            cut = cut[cut.find(" ") + 1 :] if " " in cut else cut
            if cut.strip():
                kept.append(Turn(turn.role, cut))
            break
        kept.append(turn)
        budget -= len(turn.content)
    return kept[::-1]


class RuleResolver:
    """The offline resolver: carries the topic into follow-ups that refer back to it, reading
    only the latest turns (`recent`) and stopping at the request's deadline between them."""

    def resolve(self, turns: Sequence[Turn], question: str) -> str:
        topic, previous, asked_names, answers = None, None, False, []
        asked: str | None = None  # what the last question asked of, named by nothing
        for turn in recent(turns):
            check()
            if turn.role == "user":
                previous = self._rewrite(turn.content, topic, previous, answers)
                found = topic_of(previous) or topic_of(turn.content)
                topic = found or topic
                # "Which inn in Trevellow has a purple door?" asks for a thing the answer names.
                asked_names = found is not None and not _asks_which(read(previous))
                own = _question(turn.content)[1]
                asked = None if topic_of(own) else _thing_asked(own)
            else:
                answers.insert(0, strip_markers(turn.content))
                named = topic_of(answers[0])
                if not asked_names and named:
                    topic = _placed(named, topic)  # the answer named what the question did not
                elif asked and (thing := _named_thing(answers[0], asked)):
                    # "I'm visiting Quenby Vale. When is the spring fair held?": its answer
                    # names the Quenby Vale Spring Fair, and "its highlights" are the fair's.
                    topic = Topic(thing, topic.place if topic else thing)
        return self._rewrite(question, topic, previous, answers)

    def _rewrite(
        self,
        turn: str,
        topic: Topic | None,
        previous: str | None,
        answers: Sequence[str] = (),
    ) -> str:
        opening, question = _question(turn)
        if opening and (named := topic_of(opening)):
            topic = named  # "I'm visiting Wetherley. How many arches does it have?"
        if topic is None:
            return turn
        resolved = self._resolved(question, topic, previous, answers)
        return turn if resolved == question else resolved

    def _resolved(
        self, question: str, topic: Topic, previous: str | None, answers: Sequence[str]
    ) -> str:
        reading = read(question)
        if self._names_first(reading):
            return question  # a thing of its own, named before anything refers back
        pointed = next(filter(None, (_pointed(reading, answered) for answered in answers)), None)
        if pointed is not None:
            return pointed  # "How long is that river?" after an answer naming the River Lowan
        asked = _without_opening(reading)
        if asked != question:  # "Great, and what is the shop known for?": the question in it
            reading, question = read(asked), asked
        refers = any(word.text.lower() in _BACK_REFERENCES for word in reading.words)
        if not (refers or question.rstrip().endswith("?")):
            return question  # "Thanks!", "OK.": nothing asked
        substituted = self._substitute(reading, topic)
        if substituted != question:
            return substituted
        if any(word.number is not None for word in reading.words):
            return question  # a date or a count of its own: a new topic
        rest = self._continuation(reading)
        if rest is not None and previous is not None:
            return self._continue(rest, previous, topic.phrase)
        if _asks_which(reading):
            return question  # which thing of a kind: asked of the world, not of the topic
        return _naming(reading, topic) or _with_topic(question, topic.phrase)

    @staticmethod
    def _names_first(reading: Reading) -> bool:
        """Whether a name comes before any word that refers back: then that word is about it."""
        names = _names(reading)
        if not names:
            return False
        refers = [w.i for w in reading.words if w.text.lower() in _BACK_REFERENCES]
        return not refers or names[0][0] < min(refers)

    @staticmethod
    def _substitute(reading: Reading, topic: Topic) -> str:
        """Back references replaced by the topic: "it" by "the Wherry Inn", "its" by "the
        Wherry Inn's", a closing "there" by "in Wetherley" ("at the Wherry Inn"); "the same" gets
        the topic beside it."""
        text, edits = reading.text, []
        for word in reading.words:
            lower = word.text.lower()
            if lower in _BACK_REFERENCES:
                owner = lower in _POSSESSIVES or (lower == "her" and word.dep == "poss")
                edits.append((word, f"{topic.phrase}'s" if owner else topic.phrase))
            elif lower == "there" and word.dep != "expl" and _closes(reading, word):
                place = topic.place
                edits.append((word, f"at {place}" if place.startswith("the ") else f"in {place}"))
        for word, replacement in sorted(edits, key=lambda edit: -edit[0].start):
            text = text[: word.start] + replacement + text[word.end :]
        if not edits and any(
            w.text.lower() == "same" and w.i > 0 and reading.words[w.i - 1].text.lower() == "the"
            for w in reading.words
        ):
            text = _with_topic(text, topic.phrase)
        return text[:1].upper() + text[1:]

    @staticmethod
    def _continuation(reading: Reading) -> str | None:
        """What "And the roof?", "What about the roof?" or "Also the windows?" asks about."""
        words = [w for w in reading.words if w.text[0].isalnum()]
        lowers = [w.text.lower() for w in words]
        skip = 0
        while skip < len(lowers) and lowers[skip] in _CONTINUING:
            skip += 1
        if lowers[skip : skip + 2] in (["what", "about"], ["how", "about"]):
            skip += 2
        if skip == 0 or skip >= len(words) or words[skip].tag in _WH_TAGS:
            return None  # "And how many guest rooms?" asks a question of its own
        return reading.text[words[skip].start :].rstrip("?.! ")

    @staticmethod
    def _continue(thing: str, previous: str, topic: str) -> str:
        """ "And the roof?" after "What color is the door of the Wherry Inn?": the earlier
        question, asked of the new thing in place of the thing it asked of ("What colour is
        the Tamsin's sail?" then "And the hull?" asks of the Tamsin's hull)."""
        reading = read(previous)
        asked = _asked_thing(reading)
        new = re.sub(r"^(?:the|a|an)\s+", "", thing, flags=re.IGNORECASE)
        if asked is not None and new:
            return f"{previous[: asked.start]}{new}{previous[asked.end :]}"
        return _with_topic(f"What about {thing}?", topic)


def _asked_thing(reading: Reading) -> Word | None:
    """The noun a question asks of: the first common noun that is no name's part and no
    kind of fact ("door" in "What color is the door of the Wherry Inn?")."""
    for word in reading.words:
        if word.pos != "NOUN" or word.lemma in ATTRIBUTE_NOUNS or word.dep in ("compound",):
            continue
        if not any(c.tag == "WDT" for c in reading.children(word.i)):
            return word
    return None


def _without_opening(reading: Reading) -> str:
    """A question without the words that open it: an interjection ("Great,", "OK,") and a
    joining "and", where a question of its own follows."""
    words = [w for w in reading.words if w.text[0].isalnum()]
    at = 0
    while at < len(words) and (words[at].pos == "INTJ" or words[at].text.lower() == "great"):
        at += 1
    while at < len(words) and words[at].text.lower() in _CONTINUING:
        at += 1
    if at == 0 or at >= len(words) or words[at].tag not in _WH_TAGS:
        return reading.text
    rest = reading.text[words[at].start :]
    return rest[:1].upper() + rest[1:]


def _naming(reading: Reading, topic: Topic) -> str | None:
    """The question with a bare "the park" naming the topic where the topic is a park ("How
    big is the park?" after Wexley Park asks how big Wexley Park is, not "the park of Wexley
    Park"), and a bare "the province" after "of" or before "'s" naming the topic's place ("the
    capital of the province" after the flag of Ostrava is Ostrava's capital)."""
    kinds = {w.lemma for w in read(topic.phrase).words if w.pos in ("NOUN", "PROPN")}
    for word in reading.words:
        if word.text.lower() not in ("the", "that", "this") or word.dep != "det":
            continue
        head = reading.words[word.head]
        # "the post office" of the Trevellow Post Office: its compound words are the topic's too
        said = [  # what names it, not what is said of it ("known for …")
            c for c in reading.children(head.i) if c.dep not in ("det", "case", "acl", "relcl")
        ]
        bare = all(c.dep == "compound" and c.lemma in kinds for c in said)
        first = said[0].i if said else head.i  # "the post office": nothing between
        if not bare or first != word.i + 1:
            continue
        attached = reading.words[head.head].text.lower() == "of" or any(
            c.dep == "case" for c in reading.children(head.i)
        )
        if head.lemma in kinds:
            named = topic.phrase
        elif topic.place != topic.phrase and (attached or head.lemma in _PLACE_KINDS):
            named = topic.place  # "When was the town granted a market charter?": Trevellow
        else:
            continue
        return reading.text[: word.start] + named + reading.text[head.end :]
    return None


def _thing_asked(question: str) -> str | None:
    """The head noun of a question's first "the …" phrase ("fair" in "When is the spring fair
    held?"), or None."""
    found = _definite(read(question))
    return found[1].lemma if found is not None and found[1].pos == "NOUN" else None


def _named_thing(answered: str, head: str) -> str | None:
    """The name an answer gives a thing of the asked kind ("The Quenby Vale Spring Fair" for
    "fair"), with its article inside a sentence."""
    reading = read(answered)
    for start, end in _names(reading):
        if reading.words[end - 1].lemma.lower() == head:
            return _lower(reading.span_text(start, end))
    return None


def _placed(named: Topic, before: Topic | None) -> Topic:
    """A thing the answer named, keeping the place the conversation was in when the answer
    names none of its own: "Which river flows through the town?" asked in Trevellow."""
    if before is None or named.place != named.phrase:
        return named
    return Topic(named.phrase, before.place)


def _pointed(reading: Reading, answered: str) -> str | None:
    """The question with its "that river" naming the river the last answer named."""
    if not answered:
        return None
    said = read(answered)
    for word in reading.words:
        if word.text.lower() not in ("that", "this") or word.i + 1 >= len(reading.words):
            continue
        after = reading.words[word.i + 1]  # the tagger takes "that" for a pronoun at times
        head = reading.words[word.head] if word.dep == "det" else after
        if head.pos != "NOUN":
            continue
        for start, end in said.name_spans():
            if head.lemma in {w.lemma for w in said.words[start:end]}:
                text = reading.text
                return text[: word.start] + said.span_text(start, end) + text[head.end :]
    return None


def _closes(reading: Reading, word: Word) -> bool:
    """Whether a word closes its clause: nothing but punctuation after it."""
    after = reading.words[word.i + 1 :]
    return not after or not after[0].text[0].isalnum()


MAX_REWRITE_CHARS = 300


class LLMResolver:
    """The generator rewrites the follow-up; the rules answer where its reply is unusable."""

    def __init__(self, engine: Engine, fallback: Resolver | None = None) -> None:
        self.engine = engine
        self.fallback = fallback or RuleResolver()

    def resolve(self, turns: Sequence[Turn], question: str) -> str:
        check()
        reply = self.engine.chat(rewrite_messages(recent(turns), question), max_tokens=64)
        rewritten = " ".join(reply.strip().strip('"').split())
        rewritten = re.sub(r"^(?:standalone\s+)?question:\s*", "", rewritten, flags=re.I)
        if not rewritten or len(rewritten) > MAX_REWRITE_CHARS:
            return self.fallback.resolve(turns, question)
        return rewritten


def build_resolver(mode: RewriteMode, engine: Engine) -> Resolver:
    return LLMResolver(engine) if mode == "llm" else RuleResolver()
