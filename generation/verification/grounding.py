"""Is every word of a claim said by its sources? What a cited claim adds that none of them says.

(Not to be confused with `generation.grounding`, which boxes the region of an image.)

A claim may cite a source that holds its names and numbers and still say more than it does: "a
classic example of a bridge crossing a river", "a unique event in the city", the highest of a
mountain's three cones made "the highest in the world", "deepest" grown into "deepest and
largest". So each content word of the claim (`Word.content`: nouns, names, verbs, adjectives,
adverbs, numbers) must be grounded in a source it cites, or in the question, and each
superlative or comparative must keep its scope:

- the same lemma or stem ("arches"/"arch", "designed"/"designs"), one spelling of it
  ("metre"/"meter", "grey"/"gray"), or a number equal after normalisation ("fourteen" = "14",
  "5,895" = "5895"): numbers, names and attributes must be in a source, not only the question;
- or a paraphrase, accepted at the phrase level: the claim's word beside a grounded neighbour
  ("completed in 1821") against a source's word beside the same neighbour ("finished in
  1821"), at a MiniLM cosine of at least `PARAPHRASE`. Names, numbers and attributes are never
  paraphrased, and neither is a superlative;
- a superlative or comparative ("highest", "larger") must be one a source states, of the same
  adjective, and the claim's scope ("in the world") within the source's ("of its three cones")
  or its sentence's names.

What is not grounded comes back as `Gap`s, with where it stands in the claim and why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from mmrag.generation.reading.question import with_synonyms
from mmrag.generation.reading.text import (
    STEM,
    UNITS,
    Reading,
    Word,
    read,
    read_all,
)
from mmrag.generation.reading.words import DIMENSIONS, PRONOUNS
from mmrag.runtime.deadline import check

Embed = Callable[[list[str]], np.ndarray]  # texts -> L2-normalised rows (e.g. MiniLM)

# The cosine from which a claim's phrase is the source's said in other words. Measured with
# MiniLM on phrases that share their grounded neighbour: paraphrases 0.94-0.97 ("completed"/
# "finished in 1821" 0.944, "built"/"constructed by" 0.973, "founded"/"established in" 0.95),
# antonyms and other relations up to 0.90 ("bought"/"sold by the town" 0.897, "designed"/"built
# by" 0.889, "opened"/"closed in 1983" 0.819): docs/BENCHMARKS.md, "Grounding".
PARAPHRASE = 0.92


@dataclass(frozen=True)
class Gap:
    """Something a claim says that no source it cites does, and what kind of word it is: a
    number or a name no source gives is near-fatal to a claim, a connective is not."""

    start: int  # characters of the claim, [start, end)
    end: int
    text: str
    reason: str
    kind: str = "word"  # number, name, attribute, noun, verb, modifier, degree or relation


def _said(sources: Sequence[Reading]) -> tuple[set[str], set[str]]:
    """Every lemma, stem and lower-case word the sources hold; and their numbers."""
    held, numbers = set(), set()
    for reading in sources:
        for word in reading.words:
            held |= _forms(word)
            if word.number is not None:
                numbers.add(word.number)
    return held, numbers


def _lexical(word: Word, held: set[str]) -> bool:
    return bool(_forms(word) & held)


def _forms(word: Word) -> set[str]:
    """How a word may be found: its lemma, stem, text, and a unit's one name ("km")."""
    forms = {word.lemma, STEM(word.lemma), word.text.lower()}
    unit = UNITS.get(word.lemma) or UNITS.get(word.text.lower())
    return forms | {unit} if unit else forms


def _measured(said: Reading, word: Word, sources: Sequence[Reading]) -> bool:
    """A unit, or a dimension, said of a number a source gives in the same unit: "metres"
    and "tall" in "2,417 metres tall" for "stands 2,417 m above sea level"."""
    if word.lemma not in UNITS and word.lemma not in DIMENSIONS:
        return False
    near = [*said.subtree(word.i), *(said.words[at] for at in range(max(0, word.i - 2), word.i))]
    numbers = {(w.number, w.unit) for w in near if w.number is not None and w.unit}
    for reading in sources:
        for there in reading.words:
            if (there.number, there.unit) not in numbers:
                continue
            stated = reading.dimensions(there.sentence)
            if word.lemma in UNITS or not stated or DIMENSIONS[word.lemma] in stated:
                return True
    return False


def _neighbours(reading: Reading, word: Word) -> list[Word]:
    """The content words next to a word in the parse through a preposition: its head (or the
    preposition's head: "1821" -> "completed" in "completed in 1821") and its children (or a
    preposition's objects)."""
    head = reading.words[word.head]
    near = [head, *reading.children(word.i)]
    if head.pos == "ADP":
        near.append(reading.words[head.head])
    near += [child for w in near if w.pos == "ADP" for child in reading.children(w.i)]
    return [w for w in near if w.i != word.i and w.content]


class Grounder:
    """`embed` (MiniLM) accepts paraphrases; without it only the same words ground a claim."""

    def __init__(self, embed: Embed | None = None, *, paraphrase: float = PARAPHRASE) -> None:
        self.embed = embed
        self.paraphrase = paraphrase

    def gaps(
        self,
        claim: str,
        evidence: Sequence[str],
        question: str = "",
        relation: frozenset[str] = frozenset(),
    ) -> list[Gap]:
        """What the claim says that the evidence (texts read together) does not. The words of
        a typed question's `relation` (stems: "own" in "Who owns …?") must be said by the
        evidence, not only asked: "Ned Tallack owns the inn" is not grounded by the question
        "Who owns the inn?" and a source saying he built it."""
        check()
        said, sources = read(claim), read_all(evidence)
        held, numbers = _said(sources)
        related = with_synonyms(frozenset(held))
        asked, _ = _said([read(question)] if question else [])
        gaps, open_words = [], []
        in_sources, measures, asked_only = set(), set(), set()
        for word in said.words:
            asked_relation = STEM(word.lemma) in relation  # "known" for "known for"
            if (not word.content and not asked_relation) or (word.attribute and word.negated):
                continue  # "black, not red" asserts no red: the attribute check reads it
            if word.number is not None:
                if word.number not in numbers:
                    gaps.append(_gap(word, "the number is in no cited source"))
                in_sources.add(word.i)
            elif _measured(said, word, sources):
                measures.add(word.i)  # a unit or dimension of a number: said with it
            elif _lexical(word, held) or STEM(word.lemma) in related:
                in_sources.add(word.i)
            elif word.proper or word.attribute or word.pos == "NOUN":
                # Things must be named by a source: the question naming them is not enough
                # ("A netball team has eight players" from a snippet about korfball).
                gaps.append(_gap(word, "no cited source names it"))
            elif STEM(word.lemma) in relation or not _lexical(word, asked):
                open_words.append(word)
            else:
                asked_only.add(word.i)  # the question's phrasing ("Which river flows …")
        paraphrased = self._paraphrased(said, open_words, sources, held)
        gaps += [_gap(w, "no cited source says it") for w in open_words if w.i not in paraphrased]
        gaps += self._degree_gaps(said, sources, read(question) if question else None)
        if not gaps:
            through = measures | asked_only
            gaps += relation_gaps(said, sources, in_sources, through, paraphrased)
        return sorted(gaps, key=lambda gap: (gap.start, gap.end))

    def _paraphrased(
        self, said: Reading, words: list[Word], sources: Sequence[Reading], held: set[str]
    ) -> dict[int, list[tuple[int, Word]]]:
        """The words said in other words by a source, each with the source words that say it:
        each with a grounded neighbour, against the source's words beside that neighbour."""
        if self.embed is None or not words:
            return {}
        pairs: list[tuple[int, str, str, tuple[int, Word]]] = []
        for word in words:
            for anchor in _neighbours(said, word):
                if not _lexical(anchor, held) and anchor.number is None:
                    continue
                mine = _phrase(said, word, anchor)
                for at, reading in enumerate(sources):
                    for there in reading.words:
                        if there.lemma != anchor.lemma and there.number != anchor.number:
                            continue
                        for other in _neighbours(reading, there):
                            if other.pos == word.pos or {other.pos, word.pos} <= _PREDICATES:
                                theirs = _phrase(reading, other, there)
                                pairs.append((word.i, mine, theirs, (at, other)))
        if not pairs:
            return {}
        texts = list(dict.fromkeys(text for _, a, b, _ in pairs for text in (a, b)))
        vectors = dict(zip(texts, np.asarray(self.embed(texts), dtype=np.float32), strict=True))
        found: dict[int, list[tuple[int, Word]]] = {}
        for i, a, b, there in pairs:
            if float(vectors[a] @ vectors[b]) >= self.paraphrase - 1e-6:
                found.setdefault(i, []).append(there)
        return found

    @staticmethod
    def _degree_gaps(said: Reading, sources: Sequence[Reading], asked: Reading | None) -> list[Gap]:
        """Superlatives and comparatives no source states within the claim's scope; one the
        question asks about ("Which has more arches …?") is the sources' to settle by their
        numbers, not to state."""
        asked_degrees = {(d.lemma, d.kind) for d in asked.degrees} if asked else set()
        gaps = []
        for degree in said.degrees:
            word = said.words[degree.word]
            said_of = [
                (reading, found)
                for reading in sources
                for found in reading.degrees
                if found.lemma == degree.lemma and found.kind == degree.kind
            ]
            # "X is longer than Y" turned round, asked or not, where no source says it of Y
            turned = [f for _, f in said_of if degree.subject and f.than == degree.subject]
            if turned and not any(f.subject == degree.subject for _, f in said_of):
                reason = f"its source says '{word.text}' of the {turned[0].subject or 'other'}"
                gaps.append(_gap(word, f"{reason}, not of the {degree.subject}", "degree"))
                continue
            if (degree.lemma, degree.kind) in asked_degrees:
                continue
            bounds = [found.scope | _names_near(reading, found.word) for reading, found in said_of]
            if not bounds:
                gaps.append(
                    _gap(word, f"no cited source says {degree.kind} '{word.text}'", "degree")
                )
            elif not any(degree.scope <= bound for bound in bounds):
                beyond = ", ".join(sorted(degree.scope - min(bounds, key=len)))
                reason = f"'{word.text}' beyond the scope its source gives: {beyond}"
                gaps.append(_gap(word, reason, "degree"))
        return gaps


PHRASE_WORDS = 5  # "completed in 1821", "built by Jory Treloar": the words between kept


def _phrase(reading: Reading, word: Word, anchor: Word) -> str:
    """The words from one to the other as written, or the two alone when far apart."""
    first, second = sorted((word, anchor), key=lambda w: w.i)
    if second.i - first.i < PHRASE_WORDS:
        return reading.text[first.start : second.end]
    return f"{first.text} {second.text}"


def _names_near(reading: Reading, at: int) -> set[str]:
    """The names and nouns of the sentence a source's superlative stands in, and of the
    source's first sentence (its title: "Mount Carrow. … the highest of the mountain's three
    cones")."""
    sentences = {reading.words[at].sentence, 0}
    return {
        word.number or word.lemma
        for word in reading.words
        if word.sentence in sentences and word.content and word.pos in ("PROPN", "NOUN", "NUM")
    }


def _gap(word: Word, reason: str, kind: str = "") -> Gap:
    return Gap(word.start, word.end, word.text, reason, kind or word_kind(word))


def word_kind(word: Word) -> str:
    """The kind of a word, as a gap weighs it."""
    if word.number is not None:
        return "number"
    if word.proper:
        return "name"
    if word.attribute:
        return "attribute"
    return {"NOUN": "noun", "VERB": "verb"}.get(word.pos, "modifier")


# How many content words may stand between two words said of each other in a source's parse:
# none where one is a verb or an adjective ("John Simpson designed the bridge" is not "designed
# by Thomas Telford and built by John Simpson"), one between nouns ("the viaduct … has fourteen
# arches" is "the viaduct carries the railway … on fourteen arches").
PREDICATE_REACH, NOUN_REACH = 0, 1
_NAME_PARTS = frozenset({"compound", "flat", "appos", "conj", "cc"})
_JOINED = frozenset({"compound", "flat", "appos"})  # one thing in two words
_PREDICATES = frozenset({"VERB", "ADJ"})
_NAME_WORDS = frozenset({"compound", "flat"})
_SHARED_CLAUSE = frozenset({"advcl", "xcomp", "conj", "acl", "relcl"})
_FINITE = frozenset({"VBD", "VBP", "VBZ", "MD"})
_SUBJECTS = frozenset({"nsubj", "nsubjpass"})
_PRONOUNS = PRONOUNS
# The most `fits` checks one claim's alignment may make, search and diagnosis together, before
# its relations are taken as NOT said: a repetitive source ("It faces north." 1,200 times)
# offers thousands of ways to align each word, and the search over them ran for minutes.
MAX_ALIGNMENTS = 20_000
OVER_BUDGET = "its sources say its words too many ways over to check how they are related"
_CHECK_EVERY = 256  # fits checks between two looks at the request's deadline


class _OverBudget(Exception):
    """The alignment's search used up MAX_ALIGNMENTS."""


def relation_gaps(
    said: Reading,
    sources: Sequence[Reading],
    grounded: set[int],
    through: set[int],
    paraphrased: dict[int, list[tuple[int, Word]]],
) -> list[Gap]:
    """The words of the claim said of another word (its subject, object, modifier) that no
    source says of it: each content word of the claim is aligned with one word of a source,
    and words next to each other in the claim (through function words, or `through` words: a
    measure, "Lake Ista is 60 metres deep", or a word the question gives, "The river Wend
    flows through Carrow") must stand next to each other in that source's sentence, with
    no other content word between them but those that stand for the claim's own words. Names
    are aligned whole ("Rook Hill", not any hill) and a source's pronoun, bare noun or
    subject may stand for a name its title gives.

    The search is bounded: a word's options are indexed by the sentence they stand in, so a
    word placed next to a placed one is tried only where the two can stand together (its
    sentence, or the title's), and at most MAX_ALIGNMENTS checks are made in all; past them the
    claim's relations count as not said. The request's deadline is checked as it goes."""
    aligned = grounded | paraphrased.keys()
    words = [w for w in said.words if w.i in aligned and w.content and not w.attribute]
    edges = _edges(said, {w.i for w in words}, through)
    if not edges:
        return []
    titles = [_title(reading) for reading in sources]
    options: dict[int, list[tuple[int, Word]]] = {}
    for w in words:
        check()
        options[w.i] = paraphrased.get(w.i) or [
            (at, there)
            for at, reading in enumerate(sources)
            for there in reading.words
            if _matches(said, w, reading, titles[at], there)
        ]
    for word in words:  # said, but never as the claim says it: another Carrow, not denied
        if not options[word.i]:
            return [_gap(word, f"no cited source says '{word.text}' as the claim does", "relation")]
    alignment = _Alignment(sources, titles, edges, options)
    try:
        if alignment.search():
            return []
        # The relation no source says even alone, else the last one the claim makes; the
        # word that hangs lower in the claim's parse is the one said of the other.
        alone = [(a, b) for a, b in edges if not alignment.said_alone(a, b)]
    except _OverBudget:
        return [_gap(said.words[min(i for pair in edges for i in pair)], OVER_BUDGET, "relation")]
    pair = (alone or list(edges))[-1]
    word, other = sorted((said.words[i] for i in pair), key=lambda w: -len(said.ancestors(w.i)))
    return [_gap(word, f"no cited source says '{word.text}' of '{other.text}'", "relation")]


class _Alignment:
    """The search for one alignment of a claim's words with its sources' words, and what it
    needs indexed once: each word's options by text and sentence, the words that may stand for
    the claim's in each text, and each sentence's stand-ins for its title."""

    def __init__(
        self,
        sources: Sequence[Reading],
        titles: Sequence[set[str]],
        edges: dict[tuple[int, int], Link],
        options: dict[int, list[tuple[int, Word]]],
    ) -> None:
        self.sources, self.titles, self.edges, self.options = sources, titles, edges, options
        self.near: dict[int, list[int]] = {i: [] for i in options}
        for a, b in edges:
            self.near[a].append(b)
            self.near[b].append(a)
        self.order = self._order()
        # Each word's options by text and by sentence, as positions in its list of options.
        self.in_text: dict[int, dict[int, list[int]]] = {i: {} for i in options}
        self.in_sentence: dict[int, dict[tuple[int, int], list[int]]] = {i: {} for i in options}
        for i, found in options.items():
            for n, (text, there) in enumerate(found):
                self.in_text[i].setdefault(text, []).append(n)
                self.in_sentence[i].setdefault((text, there.sentence), []).append(n)
        hopeful: dict[int, set[int]] = {}
        for found in options.values():
            for text, there in found:
                hopeful.setdefault(text, set()).add(there.i)
        self.hopeful = {text: frozenset(held) for text, held in hopeful.items()}
        self._stand_ins: dict[tuple[int, int], list[int]] = {}
        self.checks = 0

    def _order(self) -> list[int]:
        """The words in the order they are placed: the one with the fewest options first,
        then always one beside a placed word (the fewest options among them), so that each is
        tried only where its neighbour stands; a word beside none comes when none is left."""
        left = sorted(self.options, key=lambda i: (len(self.options[i]), i))
        order: list[int] = []
        while left:
            beside = [i for i in left if any(j in order for j in self.near[i])]
            order.append((beside or left)[0])
            left.remove(order[-1])
        return order

    def fits(
        self,
        chosen: dict[int, tuple[int, Word]],
        a: int,
        b: int,
        mine: Callable[[int], frozenset[int]],
    ) -> bool:
        """Whether the words chosen for `a` and `b` stand as the claim's do; `mine(text)`: the
        words of a text that stand for words of the claim."""
        self.checks += 1
        if self.checks > MAX_ALIGNMENTS:
            raise _OverBudget
        if self.checks % _CHECK_EVERY == 0:
            check()
        (text_a, word_a), (text_b, word_b) = chosen[a], chosen[b]
        if text_a != text_b:  # two sources, compared: each says its own part
            return self.edges[(a, b)].compared
        reading = self.sources[text_a]
        reach = PREDICATE_REACH if self.edges[(a, b)].predicate else NOUN_REACH
        if word_a.sentence != word_b.sentence and 0 in (word_a.sentence, word_b.sentence):
            body = word_b if word_a.sentence == 0 else word_a
            return any(
                _between(reading, body.i, stand_in, mine(text_a)) <= reach
                for stand_in in self.stand_ins(text_a, body.sentence)
            )
        return _between(reading, word_a.i, word_b.i, mine(text_a)) <= reach

    def stand_ins(self, text: int, sentence: int) -> list[int]:
        key = (text, sentence)
        if key not in self._stand_ins:
            self._stand_ins[key] = _stand_ins(self.sources[text], sentence, self.titles[text])
        return self._stand_ins[key]

    def _hopeful(self, text: int) -> frozenset[int]:
        return self.hopeful.get(text, frozenset())

    def candidates(self, i: int, j: int, placed: tuple[int, Word]) -> list[tuple[int, Word]]:
        """The options of word `i` that may stand beside `placed`, the option of its neighbour
        `j`, in their order: in its sentence or the title's (any sentence, where `placed` is
        in the title), and in another text where the two are compared."""
        text, there = placed
        if there.sentence == 0:
            found = list(self.in_text[i].get(text, ()))
        else:
            found = [
                *self.in_sentence[i].get((text, 0), ()),
                *self.in_sentence[i].get((text, there.sentence), ()),
            ]
        if self.edges[(min(i, j), max(i, j))].compared:
            found += [n for t, held in self.in_text[i].items() if t != text for n in held]
        return [self.options[i][n] for n in sorted(found)]

    def search(self, at: int = 0, chosen: dict[int, tuple[int, Word]] | None = None) -> bool:
        """Placed words checked hopefully (any word that may stand for a claim's word is
        passed over); the whole alignment exactly (only those chosen)."""
        chosen = {} if chosen is None else chosen
        if at == len(self.order):
            standing: dict[int, set[int]] = {}
            for text, word in chosen.values():
                standing.setdefault(text, set()).add(word.i)
            exact = {text: frozenset(held) for text, held in standing.items()}

            def mine(text: int) -> frozenset[int]:
                return exact.get(text, frozenset())

            return all(self.fits(chosen, a, b, mine) for a, b in self.edges)
        i = self.order[at]
        beside = next((j for j in self.near[i] if j in chosen), None)
        tried = self.options[i] if beside is None else self.candidates(i, beside, chosen[beside])
        for option in tried:
            chosen[i] = option
            placed = [(min(i, j), max(i, j)) for j in self.near[i] if j in chosen]
            if all(self.fits(chosen, a, b, self._hopeful) for a, b in placed) and self.search(
                at + 1, chosen
            ):
                return True
            del chosen[i]
        return False

    def said_alone(self, a: int, b: int) -> bool:
        """Whether some source says the relation of `a` and `b` on its own."""
        for x in self.options[a]:
            for y in self.candidates(b, a, x):
                if self.fits({a: x, b: y}, a, b, self._hopeful):
                    return True
        return False


class Link(NamedTuple):
    """How two words of a claim are joined: whether a verb or an adjective says how they are
    related, and whether a comparison does ("more arches than the Wexley Bridge"), which may
    join what two sources say."""

    predicate: bool
    compared: bool


def _edges(said: Reading, words: set[int], through: set[int]) -> dict[tuple[int, int], Link]:
    """Pairs of the given words joined in the parse through function words (and the words
    `through`) only, with how (`Link`; a verb or adjective at an end or passed through: "Lake
    Ista is 60 metres deep"); a name's parts and an appositive are one thing, not a
    relation."""
    degrees = {degree.word for degree in said.degrees}
    found: dict[tuple[int, int], Link] = {}
    for i in words:
        frontier, seen = [(i, Link(False, False))], {i}
        while frontier:
            at, link = frontier.pop()
            near = [said.words[at].head, *(c.i for c in said.children(at))]
            for j in near:
                if j in seen:
                    continue
                seen.add(j)
                word = said.words[j]
                step = word if word.head == at else said.words[at]
                if step.dep in _NAME_PARTS:
                    continue
                compared = link.compared or j in degrees or word.text.lower() == "than"
                if j in words:
                    ends = {said.words[i].pos, word.pos} & _PREDICATES
                    found[(min(i, j), max(i, j))] = Link(link.predicate or bool(ends), compared)
                elif not word.content:
                    frontier.append((j, Link(link.predicate, compared)))
                elif j in through:  # a measure ("60 metres deep") is said of its thing only
                    frontier.append((j, Link(link.predicate or word.pos in _PREDICATES, compared)))
    return dict(sorted(found.items()))


def _matches(said: Reading, word: Word, reading: Reading, title: set[str], there: Word) -> bool:
    """Whether a source's word may stand for the claim's: the same number, lemma or stem; a
    name only where the source gives it its other parts or none ("the bridge"), or a pronoun
    (`title`: the lemmas of the source's title)."""
    if word.number is not None:
        return there.number == word.number
    if there.text.lower() in _PRONOUNS and word.pos in ("NOUN", "PROPN"):
        return word.lemma in title  # "its terminus" is the title's thing
    if there.negated != word.negated:  # "is signed" is not "is not signed"
        return False
    same = {word.lemma, word.text.lower(), *with_synonyms(frozenset({STEM(word.lemma)}))}
    if not ({there.lemma, STEM(there.lemma), there.text.lower()} & same):
        return False
    name = {w.lemma for w in _cluster(said, word) if w.proper}
    if word.proper:  # "the river Carrow": its common noun is part of its name too
        name |= {c.lemma for c in said.children(word.i) if c.dep in _NAME_WORDS}
    theirs = _cluster(reading, there)
    if not any(w.proper for w in theirs):
        return True  # "the bridge", "the stone viaduct": a bare noun may stand for the name
    return name <= {w.lemma for w in theirs}  # "Rook Hill" is not "Gallow Hill", nor the
    # "Carrow" of "the Carrow hills" the river Carrow


def _cluster(reading: Reading, word: Word) -> list[Word]:
    """The words that make one name with a word: joined to it, or to each other, as parts of
    a compound ("Mizzen", "Cove" and "Lighthouse"); an apposition ("HMS Tarrant, a frigate")
    describes, it does not name."""
    found, frontier = {word.i}, [word.i]
    while frontier:
        at = frontier.pop()
        here = reading.words[at]
        near = [c.i for c in reading.children(at) if c.dep in _NAME_WORDS]
        if here.dep in _NAME_WORDS and here.head != at:
            near.append(here.head)
        for i in near:
            if i not in found:
                found.add(i)
                frontier.append(i)
    return [reading.words[i] for i in sorted(found)]


def _subject_of(reading: Reading, word: Word) -> bool:
    return any(child.dep in _SUBJECTS for child in reading.children(word.i))


def _stand_ins(reading: Reading, sentence: int, title: set[str]) -> list[int]:
    """The words of a sentence that stand for what its source's title names (the title is its
    first sentence): a pronoun, a noun of the title ("the inn" for "Wherry Inn"), the subject
    of the sentence ("The breed is naturally hornless" under "Galloway cattle"), or the head of
    a caption that is a noun phrase ("A black front door under a white stone porch.")."""
    words = reading.in_sentence(sentence)
    found = [
        w
        for w in words
        if w.text.lower() in _PRONOUNS
        or (w.lemma in title and w.pos in ("NOUN", "PROPN") and w.dep not in _JOINED)
    ]
    roots = [w for w in words if w.dep == "ROOT"]
    if any(w.pos in ("VERB", "AUX") and w.tag in _FINITE for w in words):
        found += [c for root in roots for c in reading.children(root.i) if c.dep in _SUBJECTS]
    else:
        found += roots
    # Not one that names another thing: "her sister ship, the SS Kelp" under "SS Lorne".
    return [w.i for w in found if _name_parts(reading, w, _JOINED) <= title]


def _title(reading: Reading) -> set[str]:
    """The lemmas of a source's first sentence, its title in `evidence_text`."""
    return {w.lemma for w in reading.in_sentence(0) if w.content}


def _name_parts(
    reading: Reading, word: Word, joined: frozenset[str] = frozenset({"compound", "flat"})
) -> set[str]:
    """The other words of a name ("Rook" of "Rook Hill", "Carrow" of "the river Carrow");
    a common noun's ("stone viaduct") are no name."""
    parts = [c for c in reading.children(word.i) if c.dep in joined and c.proper]
    return {c.lemma for c in parts}


def _between(reading: Reading, a: int, b: int, claimed: set[int] = frozenset()) -> int:
    """Content words strictly between two words on their path in the parse (a large number
    across sentences). Not counted: words that stand for words of the claim (`claimed`: "the
    clock on the town hall was installed" says the clock was installed on the town hall), a
    name's parts and appositives ("the engineer Agnes Thorley"), and a verb whose clause
    shares its subject ("Built in 1867, the opera house was restored": it was built)."""
    words = reading.words
    if words[a].sentence != words[b].sentence:
        return len(words) + 1
    up_a, up_b = [a, *reading.ancestors(a)], [b, *reading.ancestors(b)]
    above_b = set(up_b)
    common = next(at for at in up_a if at in above_b)
    path = up_a[: up_a.index(common) + 1] + up_b[: up_b.index(common)][::-1]
    counted = 0
    for step in range(1, len(path) - 1):
        here, before, after = words[path[step]], words[path[step - 1]], words[path[step + 1]]
        if not here.content or here.dep in _JOINED or here.i in claimed:
            continue
        # a measure's unit or dimension ("runs for 9 kilometres", "is 300 metres long"), not
        # a dimension said of another thing ("twice the length of the old harbour wall")
        if here.lemma in UNITS or (here.lemma in DIMENSIONS and here.pos != "NOUN"):
            continue
        hanging = [w for w in (before, after) if w.head == here.i]
        listed = here.pos in ("NOUN", "PROPN")
        if any(w.dep in _JOINED or (listed and w.dep == "conj") for w in hanging):
            continue  # one thing, or a list: "with a green hull and a white sail"
        clauses = [w for w in hanging if w.dep in _SHARED_CLAUSE and not _subject_of(reading, w)]
        if clauses and any(w.dep in _SUBJECTS for w in hanging):
            continue
        counted += 1
        leaves = here.head in (before.i, after.i)
        if leaves and here.dep in _SHARED_CLAUSE and _subject_of(reading, here):
            counted += 1  # out of a clause with its own subject ("while Lake Ista …")
    return counted
