"""One settings object, built once at start-up and passed down; no other module reads the env."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from mmrag.core.conversation import RewriteMode
from mmrag.generation.engines.base import EngineName
from mmrag.generation.grounding import GrounderName
from mmrag.generation.verification.attribution import AbstainPolicy
from mmrag.generation.verification.verifier import VerifierChoice
from mmrag.indexes.errors import InputError
from mmrag.indexes.images import MAX_IMAGE_PIXELS
from mmrag.indexes.ocr.reader import DEFAULT_MIN_CONFIDENCE, OcrModels
from mmrag.retrieval.rerank import RerankerChoice
from mmrag.retrieval.types import FusionMethod, RetrieverName


class Settings(BaseSettings):
    """Every path and limit of the service; env vars are MMRAG_<FIELD> (e.g. MMRAG_INDEX)."""

    model_config = SettingsConfigDict(env_prefix="MMRAG_", extra="forbid")

    index: Path = Field(Path("var/sample-index"), description="index directory to serve")
    host: str = Field("127.0.0.1", description="address the service binds")
    port: int = Field(8000, ge=1, le=65535, description="port the service listens on")
    max_question_chars: int = Field(1000, ge=1, description="longer questions get a 422")
    max_k: int = Field(100, ge=1, description="largest k a client may ask for")
    retrievers: list[RetrieverName] | None = Field(
        None, description="retrievers to use; default: every one the index has"
    )
    fusion: FusionMethod = Field(
        "auto",
        description="how lists are fused; auto: calibrated when the index has a "
        "calibration, else rrf",
    )
    device: str | None = Field(None, description="cpu, cuda, cuda:1 (default: cuda when present)")
    engine: EngineName = Field(
        "llamacpp", description="generator backend; llamacpp runs the embedded SmolLM2"
    )
    model: str | None = Field(
        None, description="generator model (hub name, path or served name); default: embedded"
    )
    engine_url: str | None = Field(None, description="base URL of an OpenAI-compatible server")
    api_key: str | None = Field(None, description="API key for engine_url, if it needs one")
    vision: bool | None = Field(
        None,
        description="the engine takes images: image sources and uploads go to it as images "
        "(default: transformers and vllm ask the model; openai and llamacpp send text)",
    )
    detector: str | None = Field(
        None,
        description="open-vocabulary detector for boxes (OWLv2, OWL-ViT, Grounding DINO): hub "
        "name or path; with it, cited images carry the box that supports the answer",
    )
    grounder: GrounderName = Field(
        "detector",
        description="how boxes are found: detector (the generator names the object, the "
        "detector boxes it) or vlm (a grounding VLM such as Qwen2.5-VL writes the box)",
    )
    max_tokens: int = Field(96, ge=8, description="longest answer in tokens")
    reranker: RerankerChoice = Field(
        "auto",
        description="auto (calibrated retrieval scores when present), none, lm-judge, "
        "or cross-encoder:NAME_OR_PATH",
    )
    threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="relevance a source needs to be kept; default: the threshold fitted by "
        "`mmrag retrieval calibrate` with calibrated scores, else 0.2 (WebQA's VLP)",
    )
    max_sources: int = Field(2, ge=1, description="most sources an answer cites")
    verifier: VerifierChoice = Field(
        "lexical",
        description="checks that each cited source supports the answer: lexical (offline: "
        "the answer's new facts must be in the source) or nli:NAME_OR_PATH",
    )
    judge_engine: EngineName | None = Field(
        None,
        description="backend of the LM judge, which scores relevance (--reranker lm-judge), "
        "checks claims cited to images against their pixels when it sees images, and decides "
        "the text claims the verifier is unsure of (judge_text); default: the generator itself",
    )
    judge_model: str | None = Field(
        None, description="the judge's model (hub name, path or served name); needs judge_engine"
    )
    judge_url: str | None = Field(
        None, description="base URL of the judge's OpenAI-compatible server (judge_engine openai)"
    )
    judge_vision: bool | None = Field(
        None, description="the judge takes images, as vision says of the generator"
    )
    judge_text: bool | None = Field(
        None,
        description="put claims the text verifier is unsure of to the LM judge, as a yes/no "
        "question over the cited text (default: when judge_engine names a judge, or when the "
        "generator is a VLM that judges images; never the embedded SmolLM2-135M, too small "
        "to judge)",
    )
    judge_timeout_s: float = Field(
        10.0,
        gt=0,
        description="how long the judge's questions about one claim may take together, within "
        "the answer's deadline; past it the claim keeps the text verifier's verdict",
    )
    rewrite: RewriteMode = Field(
        "rules",
        description="how a follow-up becomes a standalone question: rules (offline: carry the "
        "named thing of earlier turns into one that refers back to it or leaves it out) or llm "
        "(the generator rewrites it, for models that can)",
    )
    max_turns: int = Field(
        64, ge=1, description="conversations with more messages get a 422 (OpenAI shape on chat)"
    )
    max_message_chars: int = Field(
        8000, ge=1, description="earlier messages of a conversation longer than this get a 422"
    )
    abstain: AbstainPolicy = Field(
        "auto",
        description="auto: say the sources do not answer when none supports an answer; never: "
        "keep such an answer, uncited",
    )
    guided_citations: bool = Field(
        False,
        description="constrain decoding to a cited sentence where the engine can (llama.cpp "
        "grammar, vLLM guided decoding); off by default: with SmolLM2-135M on 2 CPU cores it "
        "cost Acc and doubled answer time (docs/BENCHMARKS.md)",
    )
    max_sources_limit: int = Field(
        8, ge=1, description="largest max_sources a client may ask for per request"
    )
    rerank_k: int = Field(20, ge=1, description="candidates the reranker scores")
    request_timeout_s: float = Field(
        30.0,
        gt=0,
        description="an answer's deadline from admission (reading an upload, retrieval, "
        "generation, verification): past it, it returns its sources with generation_error",
    )
    answer_concurrency: int = Field(2, ge=1, description="answers generated at once")
    answer_queue: int = Field(16, ge=0, description="answers waiting beyond those; then 429")
    search_concurrency: int = Field(8, ge=1, description="searches run at once")
    search_queue: int = Field(64, ge=0, description="searches waiting beyond those; then 429")
    max_body_bytes: int = Field(8_000_000, ge=1024, description="larger request bodies get 413")
    max_head_bytes: int = Field(
        65_536, ge=1024, description="request line and headers larger than this get 431"
    )
    max_headers: int = Field(100, ge=8, description="requests with more headers get 431")
    head_timeout_s: float = Field(
        10.0, gt=0, description="a request line and headers not in by then get 408"
    )
    body_timeout_s: float = Field(
        60.0, gt=0, description="a request body not in by then (from its headers) gets 408"
    )
    max_image_pixels: int = Field(
        MAX_IMAGE_PIXELS, ge=1, description="uploaded images with more pixels get 422"
    )
    ocr_det_model: Path | None = Field(
        None, description="PP-OCR text detection model (.onnx); default: rapidocr-onnxruntime's"
    )
    ocr_rec_model: Path | None = Field(
        None, description="PP-OCR text recognition model (.onnx); default: rapidocr-onnxruntime's"
    )
    ocr_min_confidence: float = Field(
        DEFAULT_MIN_CONFIDENCE, ge=0, le=1, description="OCR lines read less surely are dropped"
    )
    workers: int = Field(
        1, ge=1, description="server processes; each loads the models and has its own queues"
    )
    torch_threads: int | None = Field(
        None,
        ge=1,
        description="threads per process for onnxruntime, torch and the embedded llama.cpp "
        "(default: all cores; llama.cpp generates on half of them)",
    )
    cors_origins: list[str] = Field(
        default_factory=list, description="origins allowed to call the API from a browser"
    )

    @property
    def ocr_models(self) -> OcrModels:
        return OcrModels(self.ocr_det_model, self.ocr_rec_model)

    def to_env(self) -> dict[str, str]:
        """These settings as MMRAG_* variables, for worker processes that rebuild them."""
        values = self.model_dump(mode="json", exclude_none=True)
        return {
            f"MMRAG_{name.upper()}": value if isinstance(value, str) else json.dumps(value)
            for name, value in values.items()
        }

    @classmethod
    def load(cls, config_file: Path | None = None, **flags: Any) -> Settings:
        """Flags over MMRAG_* variables over the TOML config file over defaults."""
        try:
            text = config_file.read_text(encoding="utf-8") if config_file else ""  # TOML's own
            file_values = tomllib.loads(text)
            from_env = cls()
            merged = {
                **file_values,
                **from_env.model_dump(include=from_env.model_fields_set),
                **flags,
            }
            return cls(**merged)
        except FileNotFoundError:
            raise InputError(f"{config_file}: no such config file") from None
        except UnicodeDecodeError as exc:
            byte = exc.object[exc.start]
            raise InputError(
                f"{config_file}: not a TOML text file (byte 0x{byte:02x} at offset {exc.start} "
                "is not UTF-8)"
            ) from None
        except tomllib.TOMLDecodeError as exc:
            raise InputError(f"{config_file}: not valid TOML ({exc})") from None
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors()
            )
            where = f"{config_file}: " if config_file else ""
            raise InputError(f"{where}invalid settings ({problems})") from None
