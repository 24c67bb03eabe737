"""Does a cited source support the claim that cites it? Keep what it does, decline what none does.

A model of any size invents facts and cites a source for them (SmolLM2 answered "Who won the
1998 football world cup?" with "England [1]", citing a snippet about Lake Baikal). So after
generation every citation is checked against its source, and the answer that leaves is one of:

- `model`: the model's own citations, each verified;
- `verified`: the model cited nothing that holds, but a given source supports its sentence;
- `extractive`: no source supports the sentence; the source sentence that best answers the
  question replaces it, cited;
- `declined`: nothing given answers the question, so the answer says so, citing nothing;
- `unsupported`: as declined, where declining is turned off (benchmarks whose every question is
  answerable): the sentence is kept, citing nothing.

Support is decided by a `Verifier`: an NLI or cross-encoder model by name or path, or the
offline default, `LexicalVerifier`: what the claim adds to the question (numbers, names,
attributes) must be found in the source's text, caption or OCR text, with embedding similarity
breaking the tie when only some of it is.

A claim cited to an image may say what only its pixels show: WebQA writes its image questions
(colours, shapes, counts) so that the caption does not answer them. With a judge that sees
images (`ImageJudge`, the LM judge on a VLM), such a claim is supported when its text holds the
whole claim or the judge confirms it from the image, and a judge's "no" beats a partial text
match. Text sources, and every source when no judge sees images, are verified as before.
Each kept citation says what judged it and how surely, and a text source's the sentence that
supports the claim (`Citation.span`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Literal, NamedTuple, Protocol

import numpy as np
from pydantic import AfterValidator

from mmrag.generation.citations import cite_sentence, first_sentence, strip_markers
from mmrag.generation.errors import GenerationError
from mmrag.generation.types import Answer, Citation, JudgedBy, SourceLike
from mmrag.generation.verification.lexicon import (
    NUMBER_WORDS,
    STOPWORDS,
    Terms,
    attribute,
    sentence_spans,
    sentences,
    terms,
    with_synonyms,
)
from mmrag.generation.verification.questions import (
    Verdict,
    answers_the_question,
    asked_attribute,
    asks_yes_no,
    claimed_of_subject,
    gives_what_is_asked,
    polarity,
    relation,
    said_of_subject,
    yes_no_verdict,
)

DECLINE = "The indexed sources do not answer this question."
UNANSWERED = frozenset({"declined", "unsupported"})  # attributions of an answer no source backs
SUPPORTED = 0.5  # a verifier's score from which a source supports a claim
TIE_SIMILARITY = 0.6  # partial term overlap: supported if the sentences are this similar

Embed = Callable[[list[str]], np.ndarray]  # texts -> L2-normalised rows (e.g. MiniLM)


def evidence_text(source: SourceLike) -> str:
    """All a source says: its title, its caption or snippet, and any text read in its image."""
    parts = [source.title, source.text, getattr(source, "ocr_text", None) or ""]
    return ". ".join(part.rstrip(". ") for part in parts if part)


class Verifier(Protocol):
    name: str
    # A score from which the text alone settles support, whatever an image shows; below it a
    # judge that sees the image decides for an image source.
    certain: float

    def support(self, question: str, claim: str, evidence: Sequence[str]) -> float:
        """How surely the evidence (texts read together) supports the claim, in [0, 1]."""
        ...


class LexicalVerifier:
    """The offline default: what the claim says must be in the evidence.

    Every number, name, colour, shape and material of the claim must be found, those it
    repeats from the question too (a wrong number is an invented fact however similar the
    sentences are, and a snippet that never names the 1998 World Cup supports no claim about
    it), and something of what it adds to the question. Then the share of its content words
    found decides: all of them, it is supported; some, the most similar evidence sentence
    decides (`embed`, e.g. MiniLM; without it, partial is not enough), but only for a claim
    that adds something to the question. So a source with the right number about the wrong
    thing ("12", a house number in Dunmore, for the height of Dunmore's lighthouse) supports
    nothing. A yes/no answer must agree with the source's `yes_no_verdict`; one the sources
    give none for is supported only as a "yes" whose every word they hold.
    """

    name = "lexical"
    certain = 1.0  # every word of the claim found; below, a similar sentence broke a tie

    def __init__(self, embed: Embed | None = None) -> None:
        self.embed = embed

    def support(self, question: str, claim: str, evidence: Sequence[str]) -> float:
        text = " ".join(evidence)
        found = with_synonyms(terms(text).words)
        asked, said = terms(question), terms(claim)
        new = said.words - asked.words
        if said.key - found:  # a fact the evidence lacks: not about this, or invented
            return 0.0
        if len(evidence) > 1 and not _facts_belong(said, asked, evidence):
            return 0.0
        if (said.words & relation(question)) - found:  # asserts what was asked, unsaid
            return 0.0
        if new and not new & found:
            return 0.0
        if asks_yes_no(question):
            verdict = source_verdict(question, evidence)
            if verdict != polarity(claim) and (
                verdict or polarity(claim) == "no" or asked.attributes | asked.numbers
            ):
                return 0.0
        kind = asked_attribute(question)
        if kind:  # the colour it gives the thing asked about, not another part's
            claimed = claimed_of_subject(question, claim, kind)
            if claimed - asked.attributes - _given_to_subject(question, evidence, kind):
                return 0.0
        wanted = said.words or asked.words
        if not wanted:
            return 0.0
        coverage = len(wanted & found) / len(wanted)
        if coverage == 1.0 or self.embed is None or not new:
            return float(coverage == 1.0)
        candidates = sentences(text) or [text]
        vectors = self.embed([claim, *candidates])
        similarity = float(np.max(vectors[1:] @ vectors[0]))
        return similarity if similarity >= TIE_SIMILARITY else min(similarity, SUPPORTED - 0.01)


def _given_to_subject(question: str, evidence: Sequence[str], kind: str) -> set[str]:
    texts = [sentence for text in evidence for sentence in sentences(text)]
    return set().union(*(said_of_subject(question, sentence, kind) for sentence in texts))


def source_verdict(question: str, evidence: Sequence[str]) -> Verdict | None:
    """The first verdict an evidence sentence gives on a yes/no question, in evidence order."""
    verdicts = (yes_no_verdict(question, s) for text in evidence for s in sentences(text))
    return next(filter(None, verdicts), None)


def _facts_belong(said: Terms, asked: Terms, evidence: Sequence[str]) -> bool:
    """Read together, several sources can hold every fact of a claim that none of them makes:
    a lighthouse photo and a snippet giving Kilimanjaro's 5,895 metres "support" a lighthouse
    5,895 metres tall. So each fact the claim adds must stand in a sentence that also names
    what the question is about (its names; its words, when it names nothing)."""
    about = asked.names or asked.words
    sentences_terms = [terms(s).words for text in evidence for s in sentences(text)]
    return all(
        any(fact in words and words & (about - {fact}) for words in sentences_terms)
        for fact in said.key - asked.words
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

    def support(self, question: str, claim: str, evidence: Sequence[str]) -> float:
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
# auto: decline what no source supports; never: keep it, uncited (every question answerable).
AbstainPolicy = Literal["auto", "never"]


def load_verifier(spec: str, *, embed: Embed | None = None, device: str | None = None):
    """`lexical` (the offline default) or `nli:NAME_OR_PATH`."""
    try:
        _known_verifier(spec)
    except ValueError as exc:
        raise GenerationError(str(exc)) from None
    if spec == "lexical":
        return LexicalVerifier(embed)
    return NLIVerifier(spec.removeprefix("nli:"), device=device)


class CitationScores(NamedTuple):
    """ALCE's citation recall (the cited sources together support the claim) and precision
    (the share of citations that are needed: each supports the claim alone, or the others do
    not without it); None where the answer cites nothing."""

    recall: float | None
    precision: float | None


class ImageJudge(Protocol):
    """What verification asks a model that sees images (the LM judge on a VLM)."""

    def support(self, question: str, claim: str, source: SourceLike) -> float | None:
        """P(the image source shows the claim); None when it cannot see the image or gives
        no verdict."""
        ...


class Judgement(NamedTuple):
    supported: bool
    judged_by: JudgedBy
    score: float  # the text verifier's score, or the judge's P("yes")


class Attributor:
    def __init__(
        self,
        verifier: Verifier,
        *,
        threshold: float = SUPPORTED,
        judge: ImageJudge | None = None,
    ) -> None:
        """`judge`, a model that sees images, checks claims cited to image sources against
        their pixels; without one, every source is judged by its text."""
        self.verifier = verifier
        self.threshold = threshold
        self.judge = judge

    def text_support(self, question: str, claim: str, sources: Sequence[SourceLike]) -> float:
        return self.verifier.support(question, claim, [evidence_text(s) for s in sources])

    def judgement(self, question: str, claim: str, source: SourceLike) -> Judgement:
        """Whether one source supports the claim, and what said so. Its text settles it when
        it holds the whole claim; else, for an image, a judge that sees it decides (its "no"
        beating a partial text match); else the text verifier's verdict stands."""
        text = self.text_support(question, claim, [source])
        if source.modality == "image" and self.judge is not None and text < self.verifier.certain:
            seen = self.judge.support(question, claim, source)
            if seen is not None:
                return Judgement(seen >= SUPPORTED, "image", seen)
        return Judgement(text >= self.threshold, "text", text)

    def supports(self, question: str, claim: str, sources: Sequence[SourceLike]) -> bool:
        """One source as `judgement` judges it; several read together, as text."""
        if len(sources) == 1:
            return self.judgement(question, claim, sources[0]).supported
        return self.text_support(question, claim, sources) >= self.threshold

    def attribute(self, question: str, answer: Answer, *, abstain: bool = True) -> Answer:
        """The answer with only supported citations, or replaced or declined as the module
        docstring says; a failed generation is returned as it is."""
        if answer.generation_error or not answer.text:
            return answer
        sources = list(answer.sources)
        for claim in supported_parts(question, answer.text_without_markers):

            @functools.cache  # by marker: a judge that sees is asked once per claim
            def judge(marker: int, claim: str = claim) -> Judgement:
                return self.judgement(question, claim, sources[marker - 1])

            markers = [c.marker for c in answer.citations]
            kept = [n for n in markers if judge(n).supported]
            if kept:
                return self._cited(answer, claim, [_judged(sources, n, judge(n)) for n in kept])
            if len(markers) > 1:  # a comparison needs both of its sources
                joint = self._joint(question, claim, sources, markers)
                if joint is not None:
                    return self._cited(answer, claim, joint, "model")
            backing = [n for n in range(1, len(sources) + 1) if judge(n).supported]
            if backing:
                citations = [_judged(sources, n, judge(n)) for n in backing[:2]]
                return self._cited(answer, claim, citations, "verified")
            if len(sources) > 1:
                everything = range(1, len(sources) + 1)
                joint = self._joint(question, claim, sources, everything)
                if joint is not None:
                    return self._cited(answer, claim, joint[:2], "verified")
        extracted = self._extract(question, sources)
        if extracted is not None:
            sentence, number = extracted
            citation = _judged(sources, number, None)
            return self._cited(answer, sentence, [citation], "extractive")
        return self.unanswered(answer, abstain=abstain)

    def _joint(
        self, question: str, claim: str, sources: Sequence[SourceLike], markers: Sequence[int]
    ) -> list[Citation] | None:
        """Citations of sources that support the claim only read together, as text."""
        score = self.text_support(question, claim, [sources[n - 1] for n in markers])
        if score < self.threshold:
            return None
        return [_judged(sources, n, Judgement(True, "text", score)) for n in markers]

    def unanswered(self, answer: Answer, *, abstain: bool) -> Answer:
        """An answer no source supports: declined, or kept without citations."""
        if abstain:
            return replace(
                answer,
                text=DECLINE,
                text_without_markers=DECLINE,
                citations=[],
                abstained=True,
                attribution="declined",
            )
        return self._cited(answer, answer.text_without_markers, [], "unsupported")

    def _extract(self, question: str, sources: Sequence[SourceLike]) -> tuple[str, int] | None:
        """The first source sentence, in source order, that answers the question; for a
        yes/no question, the first that gives a verdict, after it ("No, the purple sign ...")."""
        yes_no = asks_yes_no(question)
        for number, source in enumerate(sources, 1):
            for sentence in _sentences_title_last(source):
                if yes_no and (verdict := yes_no_verdict(question, sentence)):
                    said = _lower_article(first_sentence(sentence))
                    return f"{verdict.capitalize()}, {said}", number
                if not yes_no and answers_the_question(question, sentence):
                    return first_sentence(sentence), number
        return None

    @staticmethod
    def _cited(answer: Answer, claim: str, citations: list[Citation], how: str = "model") -> Answer:
        """The claim, cited; each cited text source with the sentence that supports it."""
        text = cite_sentence(claim, [c.marker for c in citations])
        spans = [
            replace(c, span=support_span(claim, answer.sources[c.marker - 1].text))
            if c.modality == "text"
            else c
            for c in citations
        ]
        return replace(
            answer,
            text=text,
            text_without_markers=strip_markers(text),
            citations=spans,
            attribution=how,
        )

    def citation_scores(
        self, question: str, claim: str, cited: Sequence[SourceLike]
    ) -> CitationScores:
        if not cited:
            return CitationScores(None, None)
        if not self.supports(question, claim, cited):
            return CitationScores(0.0, 0.0)
        needed = sum(
            self.supports(question, claim, [source])
            or not self.supports(question, claim, [s for s in cited if s is not source])
            for source in cited
        )
        return CitationScores(1.0, needed / len(cited))


def support_span(claim: str, text: str) -> tuple[int, int] | None:
    """The sentence of a source's text that holds most of the claim's facts (numbers, names,
    attributes), then of its words; the first of equals. None when it shares no word."""
    said = terms(claim)
    key, words = with_synonyms(said.key), with_synonyms(said.words)
    best, found = (0, 0), None
    for start, end in sentence_spans(text):
        held = with_synonyms(terms(text[start:end]).words)
        shared = (len(key & held), len(words & held))
        if shared > best:
            best, found = shared, (start, end)
    return found


def supported_parts(question: str, claim: str) -> list[str]:
    """The claim, then its shorter versions cut at clause boundaries, longest first, each kept
    if it answers: states the question's `relation` (a word of it at least: "France won the
    1998 World Cup" answers the "football world cup" question), gives what the question asks
    for and says something beyond the question. Small models tack invented clauses onto a right
    answer ("... first held in 1981 in Greywick, a town in the UK"), and the part before the
    invention is worth keeping."""
    asked, wanted = terms(question).words, relation(question)

    def answers(part: str) -> bool:
        states = not wanted or bool(wanted & with_synonyms(terms(part).words))
        return states and gives_what_is_asked(question, part)

    body = claim.rstrip(".!? ")
    cuts = [m.start() for m in re.finditer(r",\s|;| - | (?:while|and|but|which|who) ", body)]
    shorter = [body[:cut].rstrip(" ,;") + "." for cut in reversed(cuts)]
    return [claim] * answers(claim) + [p for p in shorter if terms(p).words - asked and answers(p)]


def _sentences_title_last(source: SourceLike) -> list[str]:
    """A source's sentences to answer from: its caption or snippet says more than its title
    ("Blue Door of the Harbor Inn"), which comes last. Text read in an image is cut at its
    lines, where a sign's text breaks: read as one sentence, a page of it with no full stop
    was "extracted" whole as an 80 KB answer."""
    read = getattr(source, "ocr_text", None) or ""
    lines = [line.text for line in getattr(source, "ocr", ())] or [read]
    said = [source.text, *lines, source.title]
    return [sentence for part in said if part for sentence in sentences(part)]


def _lower_article(sentence: str) -> str:
    """To follow "Yes, ": "The sign ..." -> "the sign ...", "Six ducks" -> "six ducks";
    names keep their capitals."""
    first, _, rest = sentence.partition(" ")
    plain = first.lower() in STOPWORDS or first.lower() in NUMBER_WORDS or attribute(first.lower())
    return f"{first.lower()} {rest}" if plain else sentence


def _judged(sources: Sequence[SourceLike], marker: int, judged: Judgement | None) -> Citation:
    """The citation of source [marker]; an extracted sentence is the source's own text."""
    source = sources[marker - 1]
    return Citation(
        marker=marker,
        source_id=source.id,
        modality=source.modality,
        judged_by="text" if judged is None else judged.judged_by,
        support=None if judged is None else judged.score,
    )


def invented_terms(question: str, claim: str, sources: Sequence[SourceLike]) -> frozenset[str]:
    """Numbers and names the claim states that neither the question nor any given source
    holds: facts the model made up."""
    known = terms(question).words | terms(" ".join(evidence_text(s) for s in sources)).words
    return terms(claim).key - known
