"""HTTP request and response bodies: the public contract, published at /openapi.json."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from indexes.sources import Modality
from retrieval.types import Candidate, ModalityFilter


class SearchRequest(BaseModel):
    question: str = Field(..., description="natural-language question")
    k: int = Field(10, ge=1, description="number of hits")
    modality: ModalityFilter = Field("all", description="restrict hits to one modality")

    @field_validator("question")
    @classmethod
    def _not_blank(cls, question: str) -> str:
        question = question.strip()
        if not question:
            raise ValueError("question must not be empty")
        return question


class SearchHit(BaseModel):
    source_id: str
    modality: Modality
    score: float
    title: str
    text: str
    url: str

    @classmethod
    def from_candidate(cls, candidate: Candidate) -> SearchHit:
        source = candidate.source
        return cls(
            source_id=source.id,
            modality=source.modality,
            score=candidate.score,
            title=source.title,
            text=source.text,
            url=source.url,
        )


class SearchResponse(BaseModel):
    hits: list[SearchHit]
    took_ms: float


class Health(BaseModel):
    status: str
    sources: int
    retrievers: list[str]
    fusion: str
    image_vectors: str = Field(description="'clip', or how images are reached without CLIP")
