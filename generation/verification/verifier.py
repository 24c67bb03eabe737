"""Does a source support a claim? A `Verdict`: a probability, with its reasons.

`LexicalVerifier`, the offline default, reads the claim, the question and the evidence once
each and weighs two kinds of evidence apart:

- a hard contradiction refuses a claim outright: a yes/no answer the evidence's verdict
  contradicts, a colour the evidence gives the asked thing otherwise, a fact taken from a
  source about another thing, a fact the evidence bounds in time ("until 1962") stated as
  holding now, a hedged one ("is believed to") stated as certain;
- an ungrounded word weighs by what it is (`grounding.Gap.kind`): a number or a name no source
  gives is near-fatal, a connective or an evaluative word is not, a noun or a verb between; a
  relation said of another thing or a superlative beyond its scope weighs as its fit says
  (on long claims by capable models the parse that finds them errs more often).

The probability is a logistic model over these and the phrase similarity of claim and
evidence (`FEATURES`), fitted on labelled real claims (AttributionBench's development split)
and claims written in the embedded model's style (`bench/fit_verifier.py`, weights.json). A
claim of several clauses is judged clause by clause; the claim is as supported as its weakest
clause, and the verdict names each. `NLIVerifier` runs an NLI or cross-encoder model by name
or path instead.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Protocol

import numpy as np
from pydantic import AfterValidator

from mmrag.generation.errors import GenerationError
from mmrag.generation.reading.question import Question, as_question, with_synonyms
from mmrag.generation.reading.text import STEM, Reading, Terms, read, titled_sentences
from mmrag.generation.reading.words import HEDGES
from mmrag.generation.verification.attributes import BOUND_KINDS, attributes_of_subject, head_noun
from mmrag.generation.verification.grounding import Embed, Gap, Grounder
from mmrag.generation.verification.selection import Model, _given, fitted, polarity, source_verdict

SUPPORTED = 0.5  # a verifier's score from which a source supports a claim
FEATURES = (
    "bias",
    "grounded",  # share of the claim's content words its evidence says (paraphrases too)
    "lexical",  # share said in the same words
    "similarity",  # MiniLM cosine of the claim and its nearest evidence sentence
    *("numbers", "names", "attributes", "nouns", "verbs", "modifiers"),  # ungrounded, by kind
    "relations",  # words said of another word than the evidence says them of
    "degrees",  # superlatives and comparatives beyond the scope the evidence gives
    "length",  # log of the claim's content words
    "strict",  # every word grounded: the rule that judged alone before
)
GAP_KINDS = ("number", "name", "attribute", "noun", "verb", "modifier", "relation", "degree")
MAX_EVIDENCE_SENTENCES = 12  # of a long evidence text, the sentences nearest the claim
LONG_EVIDENCE = 2_000  # characters from which evidence is narrowed to those sentences
_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True)
class Verdict:
    """What a verifier found of a claim (or one clause of it) against its evidence."""

    claim: str
    score: float  # P(supported), calibrated on labelled claims
    contradictions: tuple[str, ...] = ()  # what the evidence says otherwise: refuses outright
    ungrounded: tuple[Gap, ...] = ()  # the words no evidence says
    clauses: tuple[Verdict, ...] = ()  # a claim of several clauses, each judged

    @property
    def support(self) -> float:
        """Its score, 0 where the evidence contradicts the claim."""
        return 0.0 if self.contradictions else self.score

    @property
    def supported(self) -> bool:
        return self.support >= SUPPORTED


class Verifier(Protocol):
    name: str
    # A score from which the text alone settles support, whatever an image shows; below it a
    # judge that sees the image decides for an image source.
    certain: float

    def verdict(self, question: Question | str, claim: str, evidence: Sequence[str]) -> Verdict:
        """The claim judged against the evidence (texts read together)."""
        ...

    def support(self, question: Question | str, claim: str, evidence: Sequence[str]) -> float:
        """How surely the evidence supports the claim, in [0, 1]: the verdict's score, 0
        where it is contradicted."""
        ...


class LexicalVerifier:
    """The offline default (module docstring); `embed` (MiniLM) lets paraphrases ground a
    claim and measures its similarity to the evidence."""

    name = "lexical"

    def __init__(self, embed: Embed | None = None) -> None:
        self.grounder = Grounder(embed)
        self.embed = embed
        found = fitted("verifier")
        assert tuple(found["features"]) == FEATURES, "weights.json was fitted on other features"
        self.model = Model(tuple(found["weights"]), found["threshold"], log_scaled=False)
        # From here the text settles it (the fit's score is right that often on its claims);
        # below, a judge that sees an image may decide.
        self.certain: float = found["certain"]

    def support(self, question: Question | str, claim: str, evidence: Sequence[str]) -> float:
        return self.verdict(question, claim, evidence).support

    def verdict(self, question: Question | str, claim: str, evidence: Sequence[str]) -> Verdict:
        question = as_question(question)
        evidence = [nearest(claim, text) for text in evidence]
        parts = clauses(claim)
        if len(parts) == 1:
            return self._judged(question, claim, evidence)
        judged = [self._judged(question, part, evidence) for part in parts]
        whole = self._judged(question, claim, evidence)
        return replace(
            whole,
            score=min(v.score for v in judged),
            contradictions=tuple(
                dict.fromkeys(c for v in (whole, *judged) for c in v.contradictions)
            ),
            clauses=tuple(judged),
        )

    def _judged(self, question: Question, claim: str, evidence: Sequence[str]) -> Verdict:
        said = read(claim)
        yes = question.kind == "yes_no" and polarity(said) == "yes"
        # A "yes" restates the question: its words must be the evidence's, not the question's.
        context = "" if yes else question.text
        gaps = self.grounder.gaps(claim, evidence, context, question.relation)
        reasons = contradictions(question, claim, evidence)
        values = self.features(question, said, evidence, gaps)
        return Verdict(claim, self.model.probability(values), tuple(reasons), tuple(gaps))

    def features(
        self, question: Question, said: Reading, evidence: Sequence[str], gaps: Sequence[Gap]
    ) -> list[float]:
        """The claim's `FEATURES` against its evidence, given what grounding found unsaid."""
        if question.kind == "yes_no" and polarity(said) == "yes":
            # What a "yes" asserts is the question itself ("Yes, it has."): its words and the
            # evidence's are what the similarity and the shares compare.
            said = read(f"{question.text} {said.text}")
        content = [word for word in said.words if word.content]
        count = max(1, len(content))
        counts = [min(3, sum(gap.kind == kind for gap in gaps)) for kind in GAP_KINDS]
        words = sum(counts[:6])  # the words unsaid, not the relations between said ones
        held: set[str] = set()
        for reading in (read(text) for text in evidence):
            held |= {w.lemma for w in reading.words} | {STEM(w.lemma) for w in reading.words}
        lexical = sum(w.lemma in held or STEM(w.lemma) in held for w in content) / count
        return [
            1.0,
            1.0 - words / count,
            lexical,
            self._similarity(said.text, evidence) if self.embed is not None else lexical,
            *counts,
            math.log(count),
            float(not gaps),
        ]

    def _similarity(self, claim: str, evidence: Sequence[str]) -> float:
        assert self.embed is not None
        sentences = [s for text in evidence for s in read(text).sentence_texts()]
        vectors = np.asarray(self.embed([claim, *sentences[:40]]), dtype=np.float32)
        return float(np.max(vectors[1:] @ vectors[0])) if sentences else 0.0


def nearest(claim: str, text: str) -> str:
    """A long evidence text narrowed to the sentences that share most words with the claim
    (in their order): a web page of 100 KB is read in the part that speaks to the claim."""
    if len(text) <= LONG_EVIDENCE:
        return text
    wanted = {STEM(word) for word in re.findall(r"\w+", claim.lower())}
    sentences = [s for s in _SPLIT.split(text) if s.strip()]
    shared = [
        (len(wanted & {STEM(w) for w in re.findall(r"\w+", s.lower())}), -at)
        for at, s in enumerate(sentences)
    ]
    kept = sorted(sorted(shared, reverse=True)[:MAX_EVIDENCE_SENTENCES], key=lambda k: -k[1])
    return " ".join(sentences[-at] for _, at in kept)


def clauses(claim: str) -> list[str]:
    """A claim's clauses, as its parse gives them: its sentences, and in each the clauses
    joined by "and", "but", "while", ";" that have a verb of their own ("The bridge was built
    in 1783 and carries the coach road"); a one-clause claim is itself."""
    reading = read(claim)
    found = []
    for start, end in reading.sentences:
        words = [w for w in reading.words if start <= w.start and w.end <= end]
        heads = [
            w
            for w in words
            if w.pos in ("VERB", "AUX")
            and (w.dep == "ROOT" or (w.dep == "conj" and reading.words[w.head].dep == "ROOT"))
        ]
        if len(heads) < 2:
            found.append(claim[start:end])
            continue
        cuts = sorted(w.i for w in heads[1:])
        bounds = [words[0].i, *cuts, words[-1].i + 1]
        for a, b in itertools.pairwise(bounds):
            piece = reading.span_text(a, b).strip(" ,;")
            piece = re.sub(r"^(?:and|but|while|or)\s+", "", piece)
            if read(piece).terms.words:
                found.append(piece)
    return found or [claim]


def contradictions(question: Question, claim: str, evidence: Sequence[str]) -> list[str]:
    """What the evidence says otherwise, as reasons: each refuses the claim outright."""
    text = " ".join(evidence)
    found = with_synonyms(read(text).terms.words)
    asked, said = question.terms, read(claim).terms
    reasons = []
    if not said.words and not (asked.words and asked.words <= found):
        reasons.append("no cited source holds what was asked")  # "Yes, it has."
    if len(evidence) > 1 and not _facts_belong(said, asked, evidence):
        reasons.append("its facts come from sources about different things")
    if question.kind == "yes_no":  # the source's verdict, where it gives one, stands
        found_verdict = source_verdict(question, evidence)
        claimed = polarity(read(claim))
        if found_verdict != claimed and (found_verdict or asked.attributes | asked.numbers):
            reasons.append(f"the sources say {found_verdict or 'neither yes nor no'}")
    kind = question.attribute
    if kind:  # the colour it gives the thing asked about, not another part's
        claimed_kind = _claimed_of_subject(question, claim, kind)
        elsewhere = claimed_kind & read(text).terms.of_kind(kind)  # said, of some thing
        if elsewhere - asked.attributes - _given_to_subject(question, evidence, kind):
            reasons.append(f"the sources give the {kind} of another thing")
    reasons += _bounded(claim, text, asked)
    return reasons


def _bounded(claim: str, text: str, asked: Terms) -> list[str]:
    """A fact its source says with doubt ("is believed to"), stated as certain; one it bounds
    in time ("was the largest until 1962", "no longer"), stated as holding now: read in the
    sentence giving most of the claim's facts the question lacks, not in a title that names
    its thing; without such facts, in the one that holds most of the claim."""
    said = read(claim)
    new = with_synonyms(said.terms.key - asked.key)
    held = [(len(new & read(text[s:e]).terms.words), -s, (s, e)) for s, e in read(text).sentences]
    span = max(held)[2] if held and max(held)[0] else support_span(claim, text)
    if span is None:
        return []
    source = read(text[span[0] : span[1]])
    reasons = []
    if _hedged(source) and not _hedged(said):
        reasons.append("its source says it with doubt")
    now = any(w.dep == "ROOT" and w.tag in ("VBZ", "VBP") for w in said.words)
    about = frozenset(w.lemma for w in said.subjects() if w.pos != "PRON")
    if now and source.former(about) and not said.former():
        reasons.append("its source says it no longer holds")
    return reasons


def _hedged(reading: Reading) -> bool:
    return any(
        w.lemma in HEDGES and (w.lemma not in ("may", "might") or w.tag == "MD")
        for w in reading.words
    )


def support_span(claim: str, text: str) -> tuple[int, int] | None:
    """The sentence of a source's text that holds most of the claim's facts (numbers, names,
    attributes), then of its words; the first of equals. None when it shares no word."""
    said = read(claim).terms
    key, words = with_synonyms(said.key), with_synonyms(said.words)
    best, found = (0, 0), None
    for start, end in read(text).sentences:
        held = with_synonyms(read(text[start:end]).terms.words)
        shared = (len(key & held), len(words & held))
        if shared > best:
            best, found = shared, (start, end)
    return found


def _claimed_of_subject(question: Question, claim: str, kind: str) -> frozenset[str]:
    """The attributes of a kind an answer gives the question's thing: those it says of the
    thing's head noun or of no noun, so "the hull is a wood-flecked white, with a green hull
    and a white sail" claims white and green for the hull, "a green hull and a white sail"
    only green. Denied ones ("black, not red") are not claimed; an answer that gives the
    thing none claims every one it names."""
    said = read(claim).terms.of_kind(kind)
    subject = _subject(question, kind)
    if subject is None:
        return said
    return attributes_of_subject(claim, subject, kind) & said or said


def _subject(question: Question, kind: str) -> frozenset[str] | None:
    head = head_noun(question.reading, question.opening_end, kind)
    return with_synonyms(frozenset({head})) if kind in BOUND_KINDS and head else None


def _given_to_subject(question: Question, evidence: Sequence[str], kind: str) -> set[str]:
    """The attributes of a kind the evidence gives what the question asks of: bound to it, or
    said in a sentence about it (or titled so) and bound to nothing else ("cut from a single
    block of granite")."""
    given: set[str] = set()
    subject = _subject(question, kind)
    for text in evidence:
        for sentence, title in titled_sentences(text):
            given |= _given(question, sentence, kind)
            about = read(sentence).terms.words | read(title).terms.words
            if subject and subject & about:
                given |= attributes_of_subject(sentence, subject, kind)
    return given


def _facts_belong(said: Terms, asked: Terms, evidence: Sequence[str]) -> bool:
    """Read together, several sources can hold every fact of a claim that none of them makes:
    a lighthouse photo and a snippet giving Kilimanjaro's 5,895 metres "support" a lighthouse
    5,895 metres tall. So each fact the claim adds must stand in a sentence that also names
    what the question is about (its names; its words, when it names nothing)."""
    about = asked.names or asked.words
    sentences_terms = [
        read(sentence).terms.words | read(title).terms.words
        for text in evidence
        for sentence, title in titled_sentences(text)
    ]
    said_somewhere = frozenset().union(*sentences_terms)  # a fact said nowhere is a gap
    return all(
        any(fact in words and words & (about - {fact}) for words in sentences_terms)
        for fact in (said.key - asked.words) & said_somewhere
    )


class NLIVerifier:
    """A sequence-classification model by hub name or path: an NLI model (P(entailment), the
    label whose name says so) or a one-logit cross-encoder (sigmoid), premise = the evidence."""

    def __init__(self, name_or_path: str, *, device: str | None = None) -> None:
        try:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError:
            raise GenerationError("the nli verifier needs transformers and torch") from None
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(name_or_path)
            self.model = AutoModelForSequenceClassification.from_pretrained(name_or_path)
        except (OSError, ValueError) as exc:
            hint = "" if Path(name_or_path).exists() else " (pass a local directory when offline)"
            raise GenerationError(f"cannot load verifier {name_or_path!r}{hint}: {exc}") from None
        self.torch = torch
        self.model.to(device or "cpu").eval()
        labels = {index: str(label).lower() for index, label in self.model.config.id2label.items()}
        entail = [index for index, label in labels.items() if "entail" in label]
        if self.model.config.num_labels > 1 and not entail:
            raise GenerationError(
                f"verifier {name_or_path!r} has no entailment label (labels: "
                f"{', '.join(labels.values())}); use an NLI or a one-logit cross-encoder model"
            )
        self.entailment = entail[0] if entail else None
        self.name = f"nli:{name_or_path}"
        self.certain = SUPPORTED  # its score is a probability of entailment

    def verdict(self, question: Question | str, claim: str, evidence: Sequence[str]) -> Verdict:
        return Verdict(claim, self.support(question, claim, evidence))

    def support(self, question: Question | str, claim: str, evidence: Sequence[str]) -> float:
        torch = self.torch
        batch = self.tokenizer(
            " ".join(evidence), claim, truncation=True, max_length=512, return_tensors="pt"
        ).to(self.model.device)
        with torch.inference_mode():
            logits = self.model(**batch).logits[0].float()
        if self.entailment is None:
            return float(torch.sigmoid(logits[0]))
        return float(torch.softmax(logits, dim=-1)[self.entailment])


def _known_verifier(spec: str) -> str:
    if spec == "lexical" or (spec.startswith("nli:") and spec[4:].strip()):
        return spec
    raise ValueError(f"unknown verifier {spec!r}; use lexical or nli:NAME_OR_PATH")


VerifierChoice = Annotated[str, AfterValidator(_known_verifier)]


def load_verifier(spec: str, *, embed: Embed | None = None, device: str | None = None):
    """`lexical` (the offline default) or `nli:NAME_OR_PATH`."""
    try:
        _known_verifier(spec)
    except ValueError as exc:
        raise GenerationError(str(exc)) from None
    if spec == "lexical":
        return LexicalVerifier(embed)
    return NLIVerifier(spec.removeprefix("nli:"), device=device)
