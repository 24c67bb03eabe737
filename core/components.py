"""Build the pipeline's parts once per process from the settings; each model loads once."""

from __future__ import annotations

from mmrag.core.attachments import AttachedImage, ImageAttacher
from mmrag.core.pipeline import QAPipeline
from mmrag.core.settings import Settings
from mmrag.indexes.collection import Collection
from mmrag.indexes.encoders.base import limit_threads
from mmrag.indexes.errors import InputError
from mmrag.retrieval.hybrid import HybridRetriever
from mmrag.retrieval.rerank import (
    VLP_THRESHOLD,
    CrossEncoderScorer,
    JudgeScorer,
    RelevanceScorer,
    SourceSelector,
)


def build_retriever(settings: Settings) -> HybridRetriever:
    return HybridRetriever(
        Collection(settings.index), settings.retrievers, settings.fusion, device=settings.device
    )


def _load_engine(settings: Settings, kind, model: str | None, url: str | None, vision):
    """An engine as the settings place it (device, threads, API key)."""
    from mmrag.generation.engines import load_engine

    return load_engine(
        kind,
        model,
        base_url=url,
        api_key=settings.api_key,
        device=settings.device,
        accepts_images=vision,
        n_threads=settings.torch_threads,
    )


def build_engine(settings: Settings):
    return _load_engine(
        settings, settings.engine, settings.model, settings.engine_url, settings.vision
    )


def build_judge(settings: Settings, retriever: HybridRetriever, engine):
    """The LM judge: on the generator itself, or on the engine the judge_* settings name (a
    small writer checked by a stronger VLM)."""
    from mmrag.generation.judge import LMJudge

    if settings.judge_engine is None:
        if settings.judge_model is not None or settings.judge_url is not None:
            raise InputError("--judge-model and --judge-url need --judge-engine")
        judge_engine = engine
    else:
        judge_engine = _load_engine(
            settings,
            settings.judge_engine,
            settings.judge_model,
            settings.judge_url,
            settings.judge_vision,
        )
    return LMJudge(judge_engine, images=image_bytes(retriever), timeout_s=settings.judge_timeout_s)


def grounding_problem(settings: Settings) -> str | None:
    """Why no grounder can be built from these settings, in one line naming the flag."""
    if settings.grounder == "detector" and settings.detector is None:
        return (
            "no detector configured: pass --detector NAME_OR_PATH (an OWLv2, OWL-ViT or "
            "Grounding DINO checkpoint, hub name or local directory; or MMRAG_DETECTOR), or "
            "--grounder vlm with an engine that writes boxes"
        )
    return None


def build_grounder(settings: Settings, engine):
    """The grounding strategy the settings name (callers that load other models first check
    `grounding_problem` before them)."""
    from mmrag.generation.grounding import TwoStepGrounder, VLMGrounder

    if (problem := grounding_problem(settings)) is not None:
        raise InputError(problem)
    if settings.grounder == "vlm":
        return VLMGrounder(engine)
    from mmrag.generation.detector import OpenVocabularyDetector

    detector = OpenVocabularyDetector(str(settings.detector), device=settings.device)
    return TwoStepGrounder(engine, detector)


def build_citation_grounder(settings: Settings, retriever: HybridRetriever, engine):
    """Boxes on cited images when grounding is configured; None when it is not."""
    from mmrag.generation.grounding import CitationGrounder

    if grounding_problem(settings) is not None:
        return None
    return CitationGrounder(build_grounder(settings, engine), image_bytes(retriever))


def build_scorer(settings: Settings, judge) -> RelevanceScorer | None:
    """None means: the calibrated retrieval scores are the relevance."""
    choice = settings.reranker
    if choice in ("auto", "none"):
        return None
    if choice == "lm-judge":
        return JudgeScorer(judge)
    # Settings accept nothing else: cross-encoder:NAME_OR_PATH.
    return CrossEncoderScorer(choice.removeprefix("cross-encoder:"), device=settings.device)


def image_bytes(retriever: HybridRetriever):
    """Image bytes of a source for engines that see images; None where there are none."""
    images = retriever.collection.images

    def read(source) -> bytes | None:
        if isinstance(source, AttachedImage):
            return source.data
        if images is None or source.modality != "image" or not source.image_ref:
            return None
        try:
            return images.read_bytes(source.image_ref)
        except InputError:  # missing or corrupt bytes: the source is described by its caption
            return None

    return read


def selection_threshold(
    settings: Settings, retriever: HybridRetriever, scorer: RelevanceScorer | None
) -> float:
    """The user's threshold; else, on calibrated scores, the one fitted for this index; else
    VLP's. Uncalibrated fused scores (RRF) are ranks, not probabilities: keep the top sources."""
    if settings.threshold is not None:
        return settings.threshold
    if scorer is not None:
        return VLP_THRESHOLD
    if retriever.fusion != "calibrated":
        return 0.0
    fitted = retriever.calibration.threshold if retriever.calibration else None
    return VLP_THRESHOLD if fitted is None else fitted


def build_pipeline(settings: Settings, retriever: HybridRetriever | None = None) -> QAPipeline:
    """Every part, each model loaded once; `retriever` when one was built already."""
    from mmrag.core.conversation import build_resolver
    from mmrag.generation.reading import text as reading
    from mmrag.generation.scene_text import DEFAULT_MODE, SceneTextAnswerer
    from mmrag.generation.writer import AnswerWriter

    limit_threads(settings.torch_threads)
    reading.warm_up(background=True)  # spaCy loads while the index and the engine do
    retriever = retriever or build_retriever(settings)
    engine = build_engine(settings)
    judge = build_judge(settings, retriever, engine)
    scorer = build_scorer(settings, judge)
    selector = SourceSelector(
        scorer,
        threshold=selection_threshold(settings, retriever, scorer),
        max_sources=settings.max_sources,
        k=settings.rerank_k,
    )
    writer = AnswerWriter(
        engine,
        max_tokens=settings.max_tokens,
        images=image_bytes(retriever),
        guided=settings.guided_citations,
    )
    return QAPipeline(
        retriever,
        selector,
        writer,
        build_attributor(settings, judge),
        abstain=settings.abstain,
        grounder=build_citation_grounder(settings, retriever, engine),
        scene_text=SceneTextAnswerer(engine, mode=DEFAULT_MODE, embed=minilm_embed()),
        resolver=build_resolver(settings.rewrite, engine),
    )


def minilm_embed():
    """The packaged MiniLM's encode, loaded once per process (retrieval usually has it)."""
    from mmrag.indexes.encoders.loading import text_encoder
    from mmrag.indexes.encoders.text import DEFAULT_TEXT_EMBEDDER

    return text_encoder(DEFAULT_TEXT_EMBEDDER).encode_texts


def build_attributor(settings: Settings, judge=None):
    """The configured verifier; with `judge` (the LM judge), claims cited to images are also
    checked against their pixels where it sees images, and claims the verifier is unsure of
    are put to it where `judges_text` says so."""
    from mmrag.generation.verification.attribution import Attributor
    from mmrag.generation.verification.verifier import load_verifier

    embed = minilm_embed() if settings.verifier == "lexical" else None
    verifier = load_verifier(settings.verifier, embed=embed, device=settings.device)
    sees = judge if judge is not None and judge.sees_images else None
    reads = judge if judge is not None and judges_text(settings, judge) else None
    return Attributor(verifier, judge=sees, text_judge=reads)


def judges_text(settings: Settings, judge) -> bool:
    """Whether the LM judge decides the text claims the verifier is unsure of: as
    `judge_text` says; by default when a judge was named (`judge_engine`) or the generator is
    a VLM that judges images, a model that can judge. The embedded SmolLM2-135M cannot: it put
    P(yes) at 0.44-0.62 on easy relevance pairs whatever they said."""
    if settings.judge_text is not None:
        return settings.judge_text
    return settings.judge_engine is not None or judge.sees_images


def build_rationale_writer(engine, choose: str = "similarity"):
    """A-OKVQA mode on an engine already loaded; MiniLM embeds answers to pick the choice."""
    from mmrag.generation.rationale import RationaleWriter

    return RationaleWriter(engine, choose=choose, embed=minilm_embed())


def build_attacher(settings: Settings) -> ImageAttacher:
    """What reads a user's own photo (`ask --image`, uploads to /v1/answer)."""
    return ImageAttacher(
        settings.ocr_models,
        min_confidence=settings.ocr_min_confidence,
        max_pixels=settings.max_image_pixels,
    )
