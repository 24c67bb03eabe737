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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Literal, NamedTuple, Protocol

import numpy as np
from pydantic import AfterValidator

from mmrag.generation.citations import cite_sentence, first_sentence, strip_markers
from mmrag.generation.errors import GenerationError
from mmrag.generation.types import Answer, Citation, SourceLike

DECLINE = "The indexed sources do not answer this question."
SUPPORTED = 0.5  # a verifier's score from which a source supports a claim
TIE_SIMILARITY = 0.6  # partial term overlap: supported if the sentences are this similar

Embed = Callable[[list[str]], np.ndarray]  # texts -> L2-normalised rows (e.g. MiniLM)

# Function words, and words any answer may add without asserting a fact.
STOPWORDS = frozenset(
    {
        "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
        "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both",
        "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few",
        "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers",
        "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its",
        "itself", "just", "me", "more", "most", "many", "much", "my", "myself", "no", "nor", "not",
        "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out",
        "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the",
        "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those",
        "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when",
        "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your",
        "yours", "yourself", "yourselves", "yes", "one", "ones", "answer", "answers", "source",
        "sources", "according", "image", "images", "photo", "photos", "picture", "pictures",
        "shown", "shows", "show", "caption", "text", "called", "named", "known", "located",
        "there's", "it's",
    }
)  # fmt: skip
# Number words read as numbers: models write "five ducks" for a caption's "Five ducks" and
# answer "3" for "three red bands". ("one" stays a word: "the red one" counts nothing.)
NUMBER_WORDS = {
    "zero": "0", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13",
    "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17", "eighteen": "18",
    "nineteen": "19", "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "hundred":
    "100", "thousand": "1000"
}  # fmt: skip
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+(?:['’][^\W\d_]+)?")
_NUMBER_WORDS = re.compile(r"^\d")
# What a question's opening asks for, and what an extracted sentence must then contain.
_ASKS_NUMBER = re.compile(
    r"^\s*(how (many|much|tall|long|old|high|far|big|wide|deep|heavy|large)|when|in what year|"
    r"what year|which year)\b",
    re.IGNORECASE,
)
_ASKS_PLACE = re.compile(r"^\s*where\b", re.IGNORECASE)
_ASKS_PERSON = re.compile(r"^\s*(who|whom|whose)\b", re.IGNORECASE)
_TYPED = (_ASKS_NUMBER, _ASKS_PLACE, _ASKS_PERSON)
# A person named as the doer ("by Hester Sutter", "to designs by ... Piers Corrigan") or as the
# subject that opens the sentence.
_PERSON = re.compile(r"\bby (?:[a-z]+ ){0,4}([A-Z][a-z]+ [A-Z][a-z]+)|^([A-Z][a-z]+ [A-Z][a-z]+) ")


def _stem():
    import Stemmer

    return Stemmer.Stemmer("english").stemWord


_STEM = _stem()
# The verbs questions ask about, said in other words by sources ("Who founded the bakery?",
# "opened by Mara Quell"). Small and explicit: a lexical check cannot know paraphrase, and an
# embedding would take antonyms ("close", "open") for synonyms. An NLI verifier knows more.
SAME_RELATION = tuple(
    frozenset(_STEM(word) for word in group)
    for group in (
        ("founded", "established", "opened"),
        ("built", "constructed", "erected"),
        ("owns", "owner"),
        ("born", "birth"),
        ("died", "death"),
        ("wrote", "written", "author"),
    )
)


@dataclass(frozen=True)
class Terms:
    """A text's content: stems of its words, its numbers, and its names (capitalised words not
    at the start of the text); numbers lose their thousands separators ("5,895" = "5895")."""

    words: frozenset[str]
    numbers: frozenset[str]
    names: frozenset[str]

    @property
    def key(self) -> frozenset[str]:
        """What an answer cannot get wrong: its numbers and names."""
        return self.numbers | self.names


def terms(text: str) -> Terms:
    words, numbers, names = set(), set(), set()
    for position, match in enumerate(_TOKEN.finditer(text)):
        token = match.group()
        if _NUMBER_WORDS.match(token):
            number = token.replace(",", "").rstrip(".")
            numbers.add(number)
            words.add(number)
            continue
        lower = token.lower()
        if lower in NUMBER_WORDS:
            numbers.add(NUMBER_WORDS[lower])
            words.add(NUMBER_WORDS[lower])
            continue
        if lower in STOPWORDS:
            continue
        stem = _STEM(lower)
        words.add(stem)
        if token[0].isupper() and position > 0:
            names.add(stem)
    return Terms(frozenset(words), frozenset(numbers), frozenset(names))


def with_synonyms(words: frozenset[str]) -> frozenset[str]:
    """The words, and every other word of a `SAME_RELATION` group one of them is in."""
    return words.union(*(group for group in SAME_RELATION if group & words))


def relation(question: str) -> frozenset[str]:
    """What a typed question ("who", "when", "how many", "where") asks about its subject: its
    words after the opening, less names and numbers ("owns", "close", "tickets sold"). The
    answer type alone (any person, any number) says nothing of it, so an answer must state it
    and its source must say it: Tomas Mallory who built the inn does not answer "Who owns the
    inn?", nor "opened in 1983" "When did the cafe close?". Untyped questions have none."""
    for asks in _TYPED:
        opening = asks.match(question)
        if opening:
            asked = terms(question)
            rest = terms(question[opening.end() :]).words - terms(opening.group()).words
            return rest - asked.key
    return frozenset()


def evidence_text(source: SourceLike) -> str:
    """All a source says: its title, its caption or snippet, and any text read in its image."""
    parts = [source.title, source.text, getattr(source, "ocr_text", None) or ""]
    return ". ".join(part for part in parts if part)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])", text) if s.strip()]


class Verifier(Protocol):
    name: str

    def support(self, question: str, claim: str, evidence: Sequence[str]) -> float:
        """How surely the evidence (texts read together) supports the claim, in [0, 1]."""
        ...


class LexicalVerifier:
    """The offline default: what the claim says must be in the evidence.

    Every number and name of the claim must be found, those it repeats from the question too
    (a wrong number is an invented fact however similar the sentences are, and a snippet that
    never names the 1998 World Cup supports no claim about it), and something of what it adds
    to the question. Then the share of its content words found decides: all of them, it is
    supported; some, the most similar evidence sentence decides (`embed`, e.g. MiniLM; without
    it, partial is not enough). So a source with the right number about the wrong thing ("12",
    a house number in Dunmore, for the height of Dunmore's lighthouse) supports nothing. A
    claim with no content of its own ("Yes, it has.") is judged by the question's.
    """

    name = "lexical"

    def __init__(self, embed: Embed | None = None) -> None:
        self.embed = embed

    def support(self, question: str, claim: str, evidence: Sequence[str]) -> float:
        text = " ".join(evidence)
        found = with_synonyms(terms(text).words)
        asked, said = terms(question), terms(claim)
        new = said.words - asked.words
        if said.key - found:  # a number or name the evidence lacks: not about this, or invented
            return 0.0
        if len(evidence) > 1 and not _facts_belong(said, asked, evidence):
            return 0.0
        if (said.words & relation(question)) - found:  # asserts what was asked, unsaid
            return 0.0
        if new and not new & found:
            return 0.0
        wanted = said.words or asked.words
        if not wanted:
            return 0.0
        coverage = len(wanted & found) / len(wanted)
        if coverage == 1.0 or self.embed is None:
            return float(coverage == 1.0)
        candidates = sentences(text) or [text]
        vectors = self.embed([claim, *candidates])
        similarity = float(np.max(vectors[1:] @ vectors[0]))
        return similarity if similarity >= TIE_SIMILARITY else min(similarity, SUPPORTED - 0.01)


def _facts_belong(said: Terms, asked: Terms, evidence: Sequence[str]) -> bool:
    """Read together, several sources can hold every fact of a claim that none of them makes:
    a lighthouse photo and a snippet giving Kilimanjaro's 5,895 metres "support" a lighthouse
    5,895 metres tall. So each number or name the claim adds must stand in a sentence that also
    names something the claim is about."""
    about = said.names | asked.names
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


EXTRACTIVE_LONG_QUESTION = 4  # content words from which one may be missing


def answers_the_question(question: str, sentence: str) -> bool:
    """Whether a source sentence could stand as the answer: it holds the question's content
    (its numbers, names and `relation` all, and all its words but one in a longer question),
    adds something, and adds what the question asks for: a number for "how many" or
    "when", a place's name for "where", a person's for "who". Without a reader model this is
    strict on purpose: an extracted sentence about the right thing that says something else
    ("opened in 1983" for "When did the cafe close?") must not pass for an answer."""
    asked, said = terms(question), terms(sentence)
    if not asked.words or not said.words - asked.words or asked.key - said.words:
        return False
    missing = asked.words - with_synonyms(said.words)
    if missing & relation(question):
        return False
    # One word of a longer question may be missing ("written" for "painted with the word").
    if len(missing) > (1 if len(asked.words) >= EXTRACTIVE_LONG_QUESTION else 0):
        return False
    return gives_what_is_asked(question, sentence)


def gives_what_is_asked(question: str, sentence: str) -> bool:
    """A number for "how many" or "when", a place's name for "where", a person's for "who";
    other questions ask for nothing this can check."""
    asked, said = terms(question), terms(sentence)
    if _ASKS_NUMBER.match(question) and not said.numbers - asked.numbers:
        return False
    if _ASKS_PLACE.match(question) and not said.names - asked.names:
        return False
    if _ASKS_PERSON.match(question):
        # A name that repeats the question's words is the thing asked about, not a person:
        # "Blue Door of the Harbor Inn" does not answer "Who painted the door of the Harbor Inn?"
        people = [next(filter(None, match.groups())) for match in _PERSON.finditer(sentence)]
        named = [terms(f"x {person}").names for person in people]
        return any(name and not name & asked.words for name in named)
    return True


class CitationScores(NamedTuple):
    """ALCE's citation recall (the cited sources together support the claim) and precision
    (the share of citations that are needed: each supports the claim alone, or the others do
    not without it); None where the answer cites nothing."""

    recall: float | None
    precision: float | None


class Attributor:
    def __init__(self, verifier: Verifier, *, threshold: float = SUPPORTED) -> None:
        self.verifier = verifier
        self.threshold = threshold

    def supports(self, question: str, claim: str, sources: Sequence[SourceLike]) -> bool:
        evidence = [evidence_text(source) for source in sources]
        return self.verifier.support(question, claim, evidence) >= self.threshold

    def attribute(self, question: str, answer: Answer, *, abstain: bool = True) -> Answer:
        """The answer with only supported citations, or replaced or declined as the module
        docstring says; a failed generation is returned as it is."""
        if answer.generation_error or not answer.text:
            return answer
        sources = list(answer.sources)
        for claim in supported_parts(question, answer.text_without_markers):
            cited = [sources[c.marker - 1] for c in answer.citations]
            kept = [
                c
                for c, s in zip(answer.citations, cited, strict=True)
                if self.supports(question, claim, [s])
            ]
            if not kept and cited and self.supports(question, claim, cited):
                kept = answer.citations  # a comparison needs both of its sources
            if kept:
                return self._cited(answer, claim, kept, "model")
            backing = [n for n, s in enumerate(sources, 1) if self.supports(question, claim, [s])]
            if not backing and len(sources) > 1 and self.supports(question, claim, sources):
                backing = list(range(1, len(sources) + 1))
            if backing:
                return self._cited(answer, claim, _citations(sources, backing[:2]), "verified")
        extracted = self._extract(question, sources)
        if extracted is not None:
            sentence, number = extracted
            return self._cited(answer, sentence, _citations(sources, [number]), "extractive")
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
        """The first source sentence, in source order, that answers the question."""
        for number, source in enumerate(sources, 1):
            for sentence in sentences(evidence_text(source)):
                if answers_the_question(question, sentence):
                    return first_sentence(sentence), number
        return None

    @staticmethod
    def _cited(answer: Answer, claim: str, citations: list[Citation], how: str) -> Answer:
        text = cite_sentence(claim, [c.marker for c in citations])
        return replace(
            answer,
            text=text,
            text_without_markers=strip_markers(text),
            citations=citations,
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


def _citations(sources: Sequence[SourceLike], markers: Sequence[int]) -> list[Citation]:
    return [
        Citation(marker=n, source_id=sources[n - 1].id, modality=sources[n - 1].modality)
        for n in markers
    ]


def invented_terms(question: str, claim: str, sources: Sequence[SourceLike]) -> frozenset[str]:
    """Numbers and names the claim states that neither the question nor any given source
    holds: facts the model made up."""
    known = terms(question).words | terms(" ".join(evidence_text(s) for s in sources)).words
    return terms(claim).key - known
