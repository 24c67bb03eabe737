"""One settings object, built once at start-up and passed down; no other module reads the env."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every path and limit of the service; env vars are MMRAG_<FIELD> (e.g. MMRAG_INDEX)."""

    model_config = SettingsConfigDict(env_prefix="MMRAG_", extra="forbid")

    index: Path = Field(Path("var/sample-index"), description="index directory to serve")
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    max_question_chars: int = Field(1000, ge=1, description="longer questions get a 422")
    max_k: int = Field(100, ge=1, description="largest k a client may ask for")
    retrievers: list[str] | None = Field(
        None, description="subset of bm25, text, clip; default: every one the index has"
    )
    fusion: str = Field("auto", description="auto, raw, rrf or calibrated")
