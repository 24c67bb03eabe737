"""mmrag from Python: open an index, then search it, ask it, or hold a conversation with it.

Researchers work in notebooks, as they do with Haystack and LlamaIndex, so the CLI's and the
service's path is one import away, with the same settings (keyword arguments as the CLI's
flags, over `MMRAG_*` variables and an optional TOML file) and the same objects the service
serialises (`Candidate`, `QAResult`):

    from mmrag.core import open_index

    index = open_index("var/sample-index")
    hits = index.search("Which river does the Kell Bridge cross?", k=5)
    result = index.answer("What color is the door of the Harbor Inn?")
    print(result.answer.text, [c.source_id for c in result.answer.citations])

    chat = index.conversation()
    chat.ask("What color is the door of the Harbor Inn?")
    follow_up = chat.ask("How many windows does it have on the upper floor?")
    print(follow_up.question)  # the follow-up as it was answered: about the Harbor Inn

Models load on first use: searching loads the retrievers only, answering the generator too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mmrag.core.attachments import AttachedImage
from mmrag.core.components import build_attacher, build_pipeline, build_retriever
from mmrag.core.pipeline import QAPipeline, QAResult
from mmrag.core.settings import Settings
from mmrag.generation.types import Turn
from mmrag.indexes.images import read_image_file
from mmrag.retrieval.hybrid import HybridRetriever
from mmrag.retrieval.types import Candidate, ModalityFilter

Photo = bytes | str | Path


def open_index(
    index: str | Path, *, config: str | Path | None = None, **settings: Any
) -> OpenIndex:
    """The index at `index`, with `settings` as the CLI's flags give them (`engine="openai"`,
    `engine_url=...`, `verifier=...`), over `MMRAG_*` variables and the `config` TOML file."""
    file = Path(config) if config is not None else None
    return OpenIndex(Settings.load(file, index=Path(index), **settings))


class OpenIndex:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._retriever: HybridRetriever | None = None
        self._pipeline: QAPipeline | None = None

    @property
    def retriever(self) -> HybridRetriever:
        if self._retriever is None:
            self._retriever = (
                self._pipeline.retriever if self._pipeline else build_retriever(self.settings)
            )
        return self._retriever

    @property
    def pipeline(self) -> QAPipeline:
        if self._pipeline is None:
            self._pipeline = build_pipeline(self.settings, retriever=self._retriever)
        return self._pipeline

    def search(
        self, question: str, k: int = 10, modality: ModalityFilter = "all"
    ) -> list[Candidate]:
        """The `k` best sources, fused across retrievers, as `mmrag search` ranks them."""
        return self.retriever.search(question, k, modality)

    def photo(self, image: Photo) -> AttachedImage:
        """A photo of your own (bytes or a path), read as an upload is: its text by OCR."""
        if not isinstance(image, bytes):
            image = read_image_file(Path(image), self.settings.max_body_bytes)
        return build_attacher(self.settings).attach(image)

    def answer(
        self,
        question: str,
        *,
        image: Photo | AttachedImage | None = None,
        conversation: list[Turn] | None = None,
        on_token: Callable[[str], None] | None = None,
        **options: Any,
    ) -> QAResult:
        """One cited sentence, as `mmrag ask` writes it; `on_token` sees the text as the model
        writes it. `options` are `QAPipeline.run`'s (`k`, `modality`, `max_sources`, ...)."""
        if image is not None and not isinstance(image, AttachedImage):
            image = self.photo(image)
        timeout = options.pop("timeout_s", self.settings.request_timeout_s)
        with self.pipeline.run(
            question, image=image, conversation=conversation or (), timeout_s=timeout, **options
        ) as run:
            for token in run:
                if on_token is not None:
                    on_token(token)
            return run.wait()

    def conversation(self, image: Photo | None = None) -> Conversation:
        return Conversation(self, image)


class Conversation:
    """Questions answered with the turns before them: a follow-up that refers back ("How many
    windows does it have?") is answered as the question it stands for. A photo, given here or
    to `ask`, stays in the conversation until another replaces it or `reset()`."""

    def __init__(self, index: OpenIndex, image: Photo | None = None) -> None:
        self.index = index
        self.turns: list[Turn] = []
        self.image = index.photo(image) if image is not None else None

    def ask(
        self,
        question: str,
        *,
        image: Photo | None = None,
        on_token: Callable[[str], None] | None = None,
        **options: Any,
    ) -> QAResult:
        if image is not None:
            self.image = self.index.photo(image)
        result = self.index.answer(
            question, image=self.image, conversation=self.turns, on_token=on_token, **options
        )
        if result.answer.generation_error is None:
            self.turns += [Turn("user", question), Turn("assistant", result.answer.text)]
        return result

    def reset(self) -> None:
        """A new conversation: no turns, no photo."""
        self.turns.clear()
        self.image = None
