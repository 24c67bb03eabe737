"""The cited one-sentence answer: prompt the engine, stop at the first sentence, fix citations."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import closing

from mmrag.generation.citations import citation_format, cite, sentence_end
from mmrag.generation.engines.base import Engine
from mmrag.generation.errors import GenerationCancelled, GenerationError
from mmrag.generation.prompts import answer_messages, without_source_labels
from mmrag.generation.reading.question import Question
from mmrag.generation.types import Answer, SourceLike, Usage


class AnswerWriter:
    """Answers a question from the selected sources in one sentence citing them as [n].

    `images(source)` returns an image source's JPEG/PNG bytes; it is called only when the engine
    takes images, otherwise image sources are described by title, caption and any OCR text.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        max_tokens: int = 96,
        images: Callable[[SourceLike], bytes | None] | None = None,
        guided: bool = True,
    ) -> None:
        self.engine = engine
        self.max_tokens = max_tokens
        self.guided = guided  # constrain decoding to a cited sentence where the engine can
        self.images = images if engine.info.accepts_images else None

    def write(
        self,
        question: Question | str,
        sources: Sequence[SourceLike],
        *,
        on_token: Callable[[str], None] | None = None,
        interrupt: Callable[[], str | None] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> Answer:
        """The cited answer; `on_token` sees the text deltas as the model writes them.
        `max_tokens` (at most the writer's own) and `temperature` are a caller's for this
        answer, as an OpenAI client asks for them.

        Deltas are raw model text up to the end of the first sentence (its markers not yet
        checked); the Answer's text is the validated one. Generation stops as soon as a second
        sentence starts, so a rambling model costs one extra token, not max_tokens.
        `question` is read once by the caller (`read_question`); a plain string is sent as
        written, with no request for a yes/no answer.
        `interrupt()` may return a reason to stop (a deadline, a client gone). The engine asks
        it while it works (llama.cpp between batches of the prompt, where no token comes for
        seconds) and this loop between tokens; either way the engine stops, which frees it for
        the next question, and the reason becomes the answer's `generation_error`.
        """
        sources = list(sources)
        emit = on_token or (lambda _delta: None)
        started = time.perf_counter()
        text = question if isinstance(question, str) else question.text
        yes_no = not isinstance(question, str) and question.kind == "yes_no"
        messages = answer_messages(text, sources, images=self.images, yes_no=yes_no)
        raw, first_token, error, usage = "", None, None, Usage()

        def interrupted() -> bool:
            """Whether to stop; the reason, kept in `error`, is the one that stopped it."""
            nonlocal error
            error = None if interrupt is None else interrupt()
            return error is not None

        try:
            constraint = citation_format(len(sources)) if self.guided else None
            deltas = self.engine.stream(
                messages,
                max_tokens=min(max_tokens or self.max_tokens, self.max_tokens),
                temperature=temperature,
                constraint=constraint,
                cancelled=None if interrupt is None else interrupted,
                usage=usage,
            )
            with closing(deltas):
                for delta in deltas:
                    if interrupted():
                        break
                    if first_token is None:
                        first_token = time.perf_counter() - started
                    emitted, raw = len(raw), raw + delta
                    end = sentence_end(raw)
                    if end is not None:
                        if end > emitted:
                            emit(raw[emitted:end])
                        raw = raw[:end]
                        break
                    emit(delta)
        except GenerationCancelled:
            pass  # `error` holds the reason `interrupted` saw
        except GenerationError as exc:
            error = str(exc)
        generate = time.perf_counter() - started
        # Half an answer is no answer; the prompt's labels alone ("Title (text) [1].") are none
        # either, but the model did write: its sources may still answer (`attribution`).
        cited = cite("" if error else without_source_labels(raw), sources)
        if error is None and not cite(raw, sources).text:
            error = f"{self.engine.info.name} model {self.engine.info.model} returned no answer"
        return Answer(
            text=cited.text,
            text_without_markers=cited.text_without_markers,
            citations=cited.citations,
            sources=sources,
            timings={"generate_s": generate, "first_token_s": first_token or generate},
            generation_error=error,
            usage=usage,
        )
