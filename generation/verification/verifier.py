"""Does a source support a claim? A score in [0, 1] from a `Verifier`.

`LexicalVerifier`, the offline default, reads the claim, the question and the evidence once
each (`reading`) and asks two things: is every word of the claim said by the evidence or the
question (`grounding`: the same lemma, number or spelling, or a paraphrase at the phrase level;
superlatives within their scope), and are the facts the question asks for the ones the
evidence gives (numbers, names, colours, yes or no, of the thing asked about). `NLIVerifier`
runs an NLI or cross-encoder model by name or path instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Protocol

from pydantic import AfterValidator

from mmrag.generation.errors import GenerationError
from mmrag.generation.reading.question import Question, as_question, with_synonyms
from mmrag.generation.reading.text import Terms, read, titled_sentences
from mmrag.generation.verification.attributes import BOUND_KINDS, attributes_of_subject, head_noun
from mmrag.generation.verification.grounding import Embed, Grounder
from mmrag.generation.verification.selection import Verdict, _given, polarity, verdict

SUPPORTED = 0.5  # a verifier's score from which a source supports a claim


class Verifier(Protocol):
    name: str
    # A score from which the text alone settles support, whatever an image shows; below it a
    # judge that sees the image decides for an image source.
    certain: float

    def support(self, question: Question | str, claim: str, evidence: Sequence[str]) -> float:
        """How surely the evidence (texts read together) supports the claim, in [0, 1]."""
        ...


class LexicalVerifier:
    """The offline default: what the claim says must be what the evidence says.

    Every word of the claim must be grounded in the evidence or the question (`Grounder`), and
    every number, name, colour, shape and material of it in the evidence (a snippet that never
    names the 1998 World Cup supports no claim about it). Each fact the claim adds must stand
    in an evidence sentence about what the question asks of, so a source with the right number
    about the wrong thing ("12", a house number in Dunmore, for the height of Dunmore's
    lighthouse) supports nothing. A typed question's relation ("Who built …") must be said; a
    yes/no answer must agree with the source's `verdict`, and where they give none it is
    supported as a grounded "no" or a "yes" whose every word they hold, unless it asks a
    colour or a count; a colour must be the one the evidence gives the thing asked about.
    `embed` (MiniLM) lets paraphrases ground a claim.
    """

    name = "lexical"
    certain = 1.0  # its scores are 0 or 1

    def __init__(self, embed: Embed | None = None) -> None:
        self.grounder = Grounder(embed)

    def support(self, question: Question | str, claim: str, evidence: Sequence[str]) -> float:
        return float(self.supports(question, claim, evidence))

    def supports(self, question: Question | str, claim: str, evidence: Sequence[str]) -> bool:
        question = as_question(question)
        text = " ".join(evidence)
        found = with_synonyms(read(text).terms.words)
        asked, said = question.terms, read(claim).terms
        if said.key - found:  # a fact the evidence lacks
            return False
        if not said.words and not (asked.words and asked.words <= found):
            return False  # "Yes, it has.": the evidence must hold what was asked
        if len(evidence) > 1 and not _facts_belong(said, asked, evidence):
            return False
        yes_no = question.kind == "yes_no"
        if yes_no:  # the source's verdict, where it gives one, stands
            found_verdict = source_verdict(question, evidence)
            claimed = polarity(read(claim))
            if found_verdict != claimed and (found_verdict or asked.attributes | asked.numbers):
                return False
        kind = question.attribute
        if kind:  # the colour it gives the thing asked about, not another part's
            claimed_kind = _claimed_of_subject(question, claim, kind)
            if claimed_kind - asked.attributes - _given_to_subject(question, evidence, kind):
                return False
        # A "yes" restates the question: its words must be the evidence's, not the question's.
        context = "" if yes_no and polarity(read(claim)) == "yes" else question.text
        return not self.grounder.gaps(claim, evidence, context, question.relation)


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


def source_verdict(question: Question, evidence: Sequence[str]) -> Verdict | None:
    """The first verdict an evidence sentence gives on a yes/no question, in evidence order,
    each sentence read with its source's title."""
    verdicts = (
        verdict(question, sentence, title)
        for text in evidence
        for sentence, title in titled_sentences(text)
    )
    return next(filter(None, verdicts), None)


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
