"""A conversation's latest turn as a standalone question, for retrieval, selection and checking.

"How many windows does it have on the upper floor?" after a question about the Harbor Inn is a
question about the Harbor Inn; answered alone, it retrieved the Heron Lodge's windows and cited
them. Every later stage needs the question a reader of the whole conversation would ask, so a
follow-up is resolved once, before retrieval, and the resolved question is returned with the
answer.

Two resolvers, chosen by the `rewrite` setting:

- `rules` (the offline default; no model needed): the topic is the named thing of the latest
  turn that names one (the question's, else the answer's: "the Harbor Inn"), carried into a
  follow-up that refers back to it: "it", "its", "they", "them", "their", a closing "there", or
  "the same"; or that leaves it out, naming nothing ("And the roof?", "How many windows are on
  the upper floor?"). A turn that names its own thing starts a new topic and is left as it is,
  as is one with a number (a date or a count asks about something of its own).
- `llm`: the generator rewrites the question from the conversation (LlamaIndex's
  condense-question mode), for models that can; the rules stand where its reply is unusable.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal, Protocol

from mmrag.generation.engines.base import Engine
from mmrag.generation.prompts import rewrite_messages
from mmrag.generation.types import Turn
from mmrag.generation.verification.reading import STOPWORDS

RewriteMode = Literal["rules", "llm"]


class Resolver(Protocol):
    def resolve(self, turns: Sequence[Turn], question: str) -> str:
        """The question as it reads on its own, given the turns before it."""
        ...


_WORD = re.compile(r"[^\W\d_][\w'’.-]*|\d[\d.,:]*|[^\w\s]")
# Words between the capitalised words of one name: "Chapel of St. Aidan", "Stratford upon Avon".
_NAME_JOINERS = frozenset({"of", "the", "de", "la", "upon", "on", "and", "&"})
_BACK_REFERENCES = {"it": "{t}", "they": "{t}", "them": "{t}", "its": "{t}'s", "their": "{t}'s"}
_CONTINUATIONS = re.compile(
    r"^\s*(?:and\s+what\s+about|what\s+about|how\s+about|and|also|but)\b[\s,]*", re.IGNORECASE
)
_CLAUSE_FINAL_THERE = re.compile(r"\bthere(?=\s*[?.!,]|\s*$)", re.IGNORECASE)
_SAME = re.compile(r"\bthe\s+same\b", re.IGNORECASE)
# Verbs that close a question after its noun ("What does the sign say?"): a noun phrase ends
# before them. Small and closed on purpose; anything else ending in -ed or -ing counts too.
_VERBS = frozenset(
    {"say", "says", "show", "shows", "have", "has", "open", "opens", "close", "closes"}
    | {"mean", "means", "look", "looks", "stand", "stands", "sell", "sells", "cost", "costs"}
    | {"cross", "crosses", "hang", "hangs", "hold", "holds", "read", "reads", "made", "built"}
)


def _words(text: str) -> list[re.Match[str]]:
    return list(_WORD.finditer(text))


def _capitalised(token: str) -> bool:
    return token[:1].isupper() and token.lower() not in STOPWORDS


_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”")


def named_things(text: str) -> list[str]:
    """Names in the order they appear, each as written with its article ("the Harbor Inn",
    "Dunmore", "St. Brigid's Church"), a possessive's "'s" left off: runs of capitalised
    words, less a question's opening word ("What", "Is") and quoted text (the words on a sign,
    "BREAD", are what it says, not what it is)."""
    text = _QUOTED.sub(lambda quoted: " " * len(quoted.group()), text)
    tokens = _words(text)
    found, at = [], 0
    while at < len(tokens):
        token = tokens[at].group()
        if not _capitalised(token) or (at == 0 and token.lower() in STOPWORDS):
            at += 1
            continue
        end = at + 1
        while end < len(tokens):
            word = tokens[end].group()
            if _capitalised(word):
                end += 1
            elif word.lower() in _NAME_JOINERS and end + 1 < len(tokens):
                following = tokens[end + 1].group()
                if not _capitalised(following):
                    break
                end += 2
            else:
                break
        begin = tokens[at].start()
        if at > 0 and tokens[at - 1].group().lower() == "the":
            begin = tokens[at - 1].start()
        name = text[begin : tokens[end - 1].end()]
        found.append(re.sub(r"['’]s$", "", name))
        at = end
    return found


def _starts_lowercase(name: str) -> str:
    """Inside a sentence: "The Harbor Inn" -> "the Harbor Inn"."""
    return "the" + name[3:] if name.startswith("The ") else name


def _definite_phrase(text: str) -> tuple[int, int] | None:
    """Where the first "the ..." noun phrase of a question stands (up to three words, ending
    before a stopword, a number, punctuation or a verb)."""
    tokens = _words(text)
    for at, token in enumerate(tokens):
        if token.group().lower() != "the":
            continue
        end = at + 1
        while end < len(tokens) and end - at <= 3:
            word = tokens[end].group()
            lower = word.lower()
            verb = lower in _VERBS or lower.endswith(("ed", "ing"))
            if not word[0].isalpha() or lower in STOPWORDS or (verb and end > at + 1):
                break
            end += 1
        if end > at + 1:
            return tokens[at].start(), tokens[end - 1].end()
    return None


def _with_topic(question: str, topic: str) -> str:
    """A question that leaves its subject out, made to name it: "of the Harbor Inn" after its
    first definite noun phrase, else after the whole question."""
    phrase = _definite_phrase(question)
    body = question.rstrip(" ?.!")
    if phrase is None:
        return f"{body} of {topic}?"
    end = phrase[1]
    return f"{question[:end]} of {topic}{question[end:]}"


class RuleResolver:
    """The offline resolver: carries the topic into follow-ups that refer back to it."""

    def resolve(self, turns: Sequence[Turn], question: str) -> str:
        topic, previous, asked_names = None, None, False
        for turn in turns:
            if turn.role == "user":
                previous = self._rewrite(turn.content, topic, previous)
                names = named_things(previous)
                topic = names[0] if names else topic
                asked_names = bool(names)
            elif not asked_names and (names := named_things(turn.content)):
                topic = names[0]  # the answer named what the question did not
        return self._rewrite(question, topic, previous)

    def _rewrite(self, question: str, topic: str | None, previous: str | None) -> str:
        if topic is None:
            return question
        topic = _starts_lowercase(topic)
        if self._names_first(question):
            return question  # a thing of its own, named before anything refers back
        substituted = self._substitute(question, topic)
        if substituted != question:
            return substituted
        if any(token.group()[0].isdigit() for token in _words(question)):
            return question  # a date or a count of its own: a new topic
        continuation = _CONTINUATIONS.match(question)
        if continuation and previous is not None:
            return self._continue(question[continuation.end() :], previous, topic)
        return _with_topic(question, topic)

    @staticmethod
    def _names_first(question: str) -> bool:
        """Whether a name comes before any word that refers back: then that word is about it."""
        names = named_things(question)
        if not names:
            return False
        first_name = question.find(names[0])
        lowered = question.lower()
        refers = [
            match.start()
            for word in _BACK_REFERENCES
            for match in re.finditer(rf"\b{word}\b", lowered)
        ]
        return not refers or first_name < min(refers)

    @staticmethod
    def _substitute(question: str, topic: str) -> str:
        """Back references replaced by the topic: "it" by "the Harbor Inn", "its" by "the
        Harbor Inn's", a closing "there" by "at the Harbor Inn"; "the same" gets it beside."""

        def replace(match: re.Match[str]) -> str:
            return _BACK_REFERENCES[match.group().lower()].format(t=topic)

        pattern = r"\b(?:" + "|".join(_BACK_REFERENCES) + r")\b"
        text = re.sub(pattern, replace, question, flags=re.IGNORECASE)
        place = f"at {topic}" if topic.lower().startswith("the ") else f"in {topic}"
        text = _CLAUSE_FINAL_THERE.sub(place, text)
        if text == question and _SAME.search(question):
            text = _with_topic(question, topic)
        return text[:1].upper() + text[1:]

    @staticmethod
    def _continue(rest: str, previous: str, topic: str) -> str:
        """ "And the roof?" after "What color is the door of the Harbor Inn?": the earlier
        question, asked of the new thing."""
        thing = rest.strip().rstrip("?.! ")
        phrase = _definite_phrase(previous)
        if phrase is not None and thing:
            start, end = phrase
            return f"{previous[:start]}{thing}{previous[end:]}"
        return _with_topic(f"What about {thing}?", topic)


MAX_REWRITE_CHARS = 300


class LLMResolver:
    """The generator rewrites the follow-up; the rules answer where its reply is unusable."""

    def __init__(self, engine: Engine, fallback: Resolver | None = None) -> None:
        self.engine = engine
        self.fallback = fallback or RuleResolver()

    def resolve(self, turns: Sequence[Turn], question: str) -> str:
        reply = self.engine.chat(rewrite_messages(turns, question), max_tokens=64)
        rewritten = " ".join(reply.strip().strip('"').split())
        rewritten = re.sub(r"^(?:standalone\s+)?question:\s*", "", rewritten, flags=re.I)
        if not rewritten or len(rewritten) > MAX_REWRITE_CHARS:
            return self.fallback.resolve(turns, question)
        return rewritten


def build_resolver(mode: RewriteMode, engine: Engine) -> Resolver:
    return LLMResolver(engine) if mode == "llm" else RuleResolver()
