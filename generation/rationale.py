"""A-OKVQA mode: a short rationale, a direct answer conditioned on it, and a multiple choice.

The rationale comes first so the direct answer can lean on it (A-OKVQA's rationale-then-answer
setting); the multiple-choice pick is derived from the direct answer rather than asked for
separately, unless `choose="likelihood"`.
"""

from __future__ import annotations

import math
import re
import string
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from mmrag.generation.citations import clean, sentence_end, strip_markers
from mmrag.generation.engines.base import Engine
from mmrag.generation.errors import GenerationError
from mmrag.generation.prompts import (
    choice_messages,
    direct_answer_messages,
    neutralise,
    rationale_messages,
    visual_context,
)
from mmrag.generation.types import SourceLike

CHOOSERS = ("similarity", "likelihood")
LETTERS = string.ascii_uppercase


def choices_problem(choices: Sequence[str] | None) -> str | None:
    """Why these choices cannot be answered, checked before anything is generated: each is
    an option letter (A to Z) to the likelihood chooser."""
    if choices is not None and len(choices) > len(LETTERS):
        return f"at most {len(LETTERS)} choices (A to Z), got {len(choices)}"
    return None


_ANSWER_PREFIX = re.compile(r"^(?:the\s+)?(?:correct\s+)?answer\s+is\s*:?\s*", re.IGNORECASE)


@dataclass
class RationaleResult:
    rationale: str
    direct_answer: str
    multiple_choice: str | None  # None without choices (or, by likelihood, when no letter won)
    choice_scores: dict[str, float] | None  # cosine to the direct answer, or P(letter)
    timings: dict[str, float] = field(default_factory=dict)


def leading_sentences(text: str, count: int) -> str:
    """The first `count` sentences of model output, markers removed."""
    rest, kept = clean(text), []
    for _ in range(count):
        end = sentence_end(rest)
        if end is None:
            kept.append(rest)
            break
        kept.append(rest[:end])
        rest = rest[end:]
    return strip_markers(" ".join(" ".join(kept).split()))


def short_answer(text: str) -> str:
    """A direct answer as A-OKVQA scores it: one line, no "The answer is", no end punctuation."""
    line = clean(text).split("\n", 1)[0]
    return _ANSWER_PREFIX.sub("", line).strip().rstrip(".!?").strip().strip("\"'").strip()


def letter_probabilities(logprobs: dict[str, float], letters: str) -> dict[str, float]:
    """P(letter) renormalised over the option letters; "B", " B", "B." and "(B" count alike."""
    mass = dict.fromkeys(letters, 0.0)
    for token, logprob in logprobs.items():
        letter = token.strip().strip(".):(").upper()
        if letter in mass:
            mass[letter] += math.exp(logprob)
    total = sum(mass.values())
    return {k: (v / total if total else 0.0) for k, v in mass.items()}


class RationaleWriter:
    """`choose="similarity"` picks the choice whose embedding is nearest the direct answer's
    (`embed` returns L2-normalised rows, e.g. MiniLM); `"likelihood"` asks the engine for the
    option letter and reads P(A), P(B), ... from `next_token_logprobs`, since the Engine
    interface scores next tokens, not whole strings."""

    def __init__(
        self,
        engine: Engine,
        *,
        choose: str = "similarity",
        embed: Callable[[list[str]], np.ndarray] | None = None,
    ) -> None:
        if choose not in CHOOSERS:
            raise GenerationError(f"unknown choice method {choose!r}; use {' or '.join(CHOOSERS)}")
        if choose == "similarity" and embed is None:
            raise GenerationError(
                "choose='similarity' needs embed (texts -> L2-normalised rows), e.g. the packaged "
                "MiniLM; or use choose='likelihood'"
            )
        self.engine = engine
        self.choose = choose
        self.embed = embed

    def answer(
        self,
        question: str,
        *,
        image: bytes | None = None,
        caption: str | None = None,
        choices: Sequence[str] | None = None,
        knowledge: Sequence[SourceLike] = (),
    ) -> RationaleResult:
        """`image` reaches the model only if the engine takes images; `caption` stands in
        otherwise (with neither, the model sees the question and any knowledge alone)."""
        if (problem := choices_problem(choices)) is not None:
            raise GenerationError(problem)
        timings: dict[str, float] = {}
        started = time.perf_counter()
        context = visual_context(
            question,
            image=image if self.engine.info.accepts_images else None,
            caption=caption,
            knowledge=knowledge,
        )
        raw = self.engine.chat(rationale_messages(context), max_tokens=64)
        rationale = leading_sentences(raw, 2)
        timings["rationale_s"] = time.perf_counter() - started

        mark = time.perf_counter()
        said = neutralise(rationale)
        direct = short_answer(
            self.engine.chat(direct_answer_messages(context, said), max_tokens=12)
        )
        timings["direct_answer_s"] = time.perf_counter() - mark

        choice, scores = None, None
        if choices:
            mark = time.perf_counter()
            if self.choose == "similarity":
                choice, scores = self._nearest(direct, list(choices))
            else:
                choice, scores = self._likeliest(context, said, list(choices))
            timings["choice_s"] = time.perf_counter() - mark
        timings["total_s"] = time.perf_counter() - started
        return RationaleResult(rationale, direct, choice, scores, timings)

    def _nearest(self, direct: str, choices: list[str]) -> tuple[str, dict[str, float]]:
        vectors = np.asarray(self.embed([direct or " ", *choices]), dtype=np.float32)
        cosines = vectors[1:] @ vectors[0]
        scores = {choice: float(c) for choice, c in zip(choices, cosines, strict=True)}
        return choices[int(np.argmax(cosines))], scores

    def _likeliest(
        self, context: list[str | dict], rationale: str, choices: list[str]
    ) -> tuple[str | None, dict[str, float]]:
        letters = LETTERS[: len(choices)]
        messages = choice_messages(context, rationale, choices, letters)
        probabilities = letter_probabilities(
            self.engine.next_token_logprobs(messages, top_k=20), letters
        )
        scores = {c: probabilities[k] for k, c in zip(letters, choices, strict=True)}
        best = max(scores, key=scores.__getitem__)
        return (best if scores[best] > 0 else None), scores
