"""Short answers about the text in a photo (ST-VQA): written freely, or chosen among what OCR read.

ST-VQA answers are a few words, usually copied from the scene text, and ANLS forgives a letter
or two but nothing more. A small model asked to write the answer freely paraphrases, adds words
or invents a name, so two choosers keep the answer inside what was read: the candidates are
each OCR line and every run of up to `MAX_WORDS` consecutive words in it, less the runs made
only of the question's own words ("BAKERY" for "What is the name of the bakery?"), which
answer nothing (a small model's free answer repeats the question, and would snap to them).

- `free`: the model writes the answer (at most a few tokens), cleaned of chatter.
- `likelihood`: the candidate whose opening the model is likeliest to write: its first tokens'
  log-probabilities (`next_token_logprobs`, top 20) are matched against each candidate's start,
  since the Engine interface scores next tokens, not whole strings; among candidates opening
  with the same token the shortest wins (answers are short).
- `similarity`: the free answer snapped to the candidate nearest it (MiniLM cosine), so the
  model's reading of the question is kept and its spelling replaced by the sign's.

Which wins is measured in docs/BENCHMARKS.md; the run's default is the winner.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from mmrag.generation.citations import cite_sentence, strip_markers
from mmrag.generation.engines.base import Engine
from mmrag.generation.errors import GenerationError
from mmrag.generation.prompts import scene_text_messages
from mmrag.generation.rationale import short_answer
from mmrag.generation.reading.question import Question, as_question
from mmrag.generation.reading.text import STEM, STOPWORDS, read
from mmrag.generation.types import Answer, Citation, SourceLike
from mmrag.generation.verification.selection import gives_what_is_asked
from mmrag.generation.verification.statements import evidence_text, read_in_image

ANSWER_MODES = ("free", "likelihood", "similarity")
DEFAULT_MODE = "similarity"  # the winner on scene-text questions (docs/BENCHMARKS.md)
MAX_WORDS = 3
MAX_CANDIDATES = 60
MAX_ANSWER_TOKENS = 12
_NUMERIC = re.compile(r"\d+(?:[.,:/-]\d+)*")  # 10, 1887, 5,895, 12:30


def candidates(lines: Sequence[str], max_words: int = MAX_WORDS) -> list[str]:
    """Every line, then every run of 1..max_words consecutive words in it, as written; first
    spelling of each (case-insensitive) kept, in reading order."""
    found: dict[str, str] = {}
    for line in lines:
        words = [word for word in read(line).words if word.text[0].isalnum()]
        runs = [line.strip()] + [
            line[words[start].start : words[start + size - 1].end]
            for size in range(1, max_words + 1)
            for start in range(len(words) - size + 1)
        ]
        for run in runs:
            if run:
                found.setdefault(run.lower(), run)
    return list(found.values())[:MAX_CANDIDATES]


def _words(text: str) -> set[str]:
    return {word.text.lower() for word in read(text).words if word.text[0].isalnum()}


def answering(question: Question, spans: list[str]) -> list[str]:
    """The spans that say something the question does not, and of those the ones that give
    what it asks for (a number for "in what year"), where any does; for a number, the spans
    that are one where any is ("10", not the "1" inside "M1SOL" that OCR read off a bus)."""
    asked = _words(question.text)
    new = [span for span in spans if not _words(span) <= asked] or spans
    giving = [span for span in new if gives_what_is_asked(question, span)] or new
    if question.numeric:
        return [span for span in giving if _NUMERIC.fullmatch(span)] or giving
    return giving


@dataclass
class SceneTextAnswer:
    answer: str
    mode: str
    free: str | None = None  # what the model wrote, where it was asked to
    candidates: int = 0
    timings: dict[str, float] = field(default_factory=dict)


def _opening(token: str) -> str:
    return token.strip().lower()


class SceneTextAnswerer:
    """`embed` (texts -> L2-normalised rows) is needed for `similarity` only."""

    def __init__(
        self,
        engine: Engine,
        *,
        mode: str = "free",
        embed: Callable[[list[str]], np.ndarray] | None = None,
    ) -> None:
        if mode not in ANSWER_MODES:
            raise GenerationError(f"unknown answer mode {mode!r}; use {', '.join(ANSWER_MODES)}")
        if mode == "similarity" and embed is None:
            raise GenerationError("answer mode 'similarity' needs embed (e.g. the packaged MiniLM)")
        self.engine = engine
        self.mode = mode
        self.embed = embed

    def answer(
        self, question: Question | str, lines: Sequence[str], *, image: bytes | None = None
    ) -> SceneTextAnswer:
        """The short answer; `image` reaches the model only if the engine takes images."""
        question = as_question(question)
        started = time.perf_counter()
        seen = image if self.engine.info.accepts_images else None
        messages = scene_text_messages(question.text, " ".join(lines), image=seen)
        options = answering(question, candidates(lines))
        free = None
        if self.mode in ("free", "similarity") or not options:
            free = short_answer(self.engine.chat(messages, max_tokens=MAX_ANSWER_TOKENS))
        if not options or self.mode == "free":
            answer = free or ""
        elif self.mode == "similarity":
            answer = self._nearest(free or question.text, options)
        else:
            answer = self._likeliest(messages, options)
        timings = {"answer_s": time.perf_counter() - started}
        return SceneTextAnswer(answer, self.mode, free, len(options), timings)

    def _nearest(self, written: str, options: list[str]) -> str:
        assert self.embed is not None
        vectors = np.asarray(self.embed([written, *options]), dtype=np.float32)
        return options[int(np.argmax(vectors[1:] @ vectors[0]))]

    def _likeliest(self, messages: list, options: list[str]) -> str:
        logprobs = self.engine.next_token_logprobs(messages, top_k=20)
        best: tuple[float, int, int] | None = None  # (-logprob, length, position)
        for position, option in enumerate(options):
            lowered = option.lower()
            scores = [
                lp
                for token, lp in logprobs.items()
                if _opening(token) and lowered.startswith(_opening(token))
            ]
            if scores:
                key = (-max(scores), len(option), position)
                best = key if best is None or key < best else best
        return options[best[2]] if best is not None else options[0]


# Lemmas by which a question points at the photo it comes with and its text, rather than at
# the world (its colours and counts are seen, not read: `asks_about`).
_ABOUT_THE_TEXT = frozenset(
    {"sign", "write", "writing", "say", "read", "text", "word", "board", "label", "poster"}
    | {"name", "call", "letter", "number", "this", "image", "photo", "picture"}
)


def asks_about(question: Question, lines: Sequence[str]) -> bool:
    """Whether a question is about a photo's text: it points at text ("this sign", "what is
    written") or shares a word with what was read in it ("double parking" for "NO DOUBLE
    PARKING"). Only then may an answer be read off the photo: "Who won the 1998 world cup?"
    asked with a street sign attached is still declined, and "What color is the door in this
    photo?" is not answered with the house number painted on it."""
    if question.attribute or question.kind == "count":
        return False  # a colour, a shape, a material or a count is seen, not read
    asked = {word.lemma for word in question.reading.words} | _words(question.text)
    said = _words(" ".join(lines)) - STOPWORDS
    return bool(asked & _ABOUT_THE_TEXT or asked & said)


def cites_what_is_pointed_at(question: Question, answer: Answer, image_id: str) -> bool:
    """Whether an answer to a question pointing at the attached photo ("What does this bus
    say?") cites the photo or a source that speaks of what it points at (a bus). A small
    model fed the photo's text beside retrieved captions may frame one of them as the answer
    ("The text on the side of the bus says: A tabby cat looking to the side"), and a
    caption of a cat verifies a sentence quoting it; it says nothing of this bus."""
    reading = question.reading
    pointed = frozenset(  # "this bus": the noun "this" or "these" points at
        STEM(reading.words[word.head].lemma)
        for word in reading.words
        if word.text.lower() in ("this", "these") and word.dep == "det"
    )
    if not pointed or not answer.citations:
        return True
    sources = [answer.sources[citation.marker - 1] for citation in answer.citations]
    return any(
        source.id == image_id or pointed & read(evidence_text(source)).terms.words
        for source in sources
    )


def read_off_the_image(
    answerer: SceneTextAnswerer,
    question: Question,
    answer: Answer,
    image: SourceLike,
    lines: Sequence[str],
    *,
    data: bytes | None = None,
    marker: int = 1,
) -> Answer:
    """An answer no source supported, replaced by what the attached photo says: the span of
    its scene text that answers the question (`SceneTextAnswerer`, as `eval run stvqa` picks
    it), quoted and cited to the photo. A small model asked to write freely from OCR text
    declines or paraphrases a sign (SmolLM2 declined 6 of 7 sign questions); choosing among
    what was read keeps the answer to the sign's own words. The answer is left as it was for
    a yes/no question, a photo with no text, or a question not about the photo."""
    if not lines or question.kind == "yes_no" or not asks_about(question, lines):
        return answer
    span = answerer.answer(question, lines, image=data).answer.strip()
    if not span:
        return answer
    text = cite_sentence(read_in_image(span), [marker])
    citation = Citation(marker=marker, source_id=image.id, modality=image.modality)
    return replace(
        answer,
        text=text,
        text_without_markers=strip_markers(text),
        citations=[citation],
        abstained=False,
        attribution="extractive",
    )
