"""Flags shared by several commands, and how they override the settings object."""

from __future__ import annotations

import argparse
from pathlib import Path

from service.config import Settings


def comma_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def add_retrieval_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--retrievers",
        type=comma_list,
        help="comma-separated subset of bm25,text,clip (default: all in the index)",
    )
    parser.add_argument(
        "--fusion",
        choices=["auto", "raw", "rrf", "calibrated"],
        help="auto (default): calibrated when the index has a calibration, else rrf",
    )
    parser.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: cuda when present)")


def add_generation_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        choices=["llamacpp", "openai", "vllm", "transformers"],
        help="generator backend (default llamacpp with the embedded SmolLM2)",
    )
    parser.add_argument("--model", help="model: hub name, path, or the name a server serves")
    parser.add_argument(
        "--base-url",
        dest="engine_url",
        help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8001/v1 (vLLM)",
    )
    parser.add_argument("--max-tokens", type=int)


def add_pipeline_options(parser: argparse.ArgumentParser) -> None:
    add_config_option(parser)
    add_retrieval_options(parser)
    add_generation_options(parser)
    parser.add_argument(
        "--reranker", help="auto, none, lm-judge or cross-encoder:NAME_OR_PATH (default auto)"
    )
    parser.add_argument("--threshold", type=float, help="relevance to keep a source (default 0.2)")
    parser.add_argument("--max-sources", type=int, help="most sources to cite (default 2)")
    parser.add_argument("--rerank-k", type=int, help="candidates to rerank (default 20)")


def add_config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="TOML file of settings (MMRAG_* env overrides)")


def settings_from(args: argparse.Namespace) -> Settings:
    """The config file and MMRAG_* variables, overridden by whichever flags were given."""
    given = {
        name: value
        for name, value in vars(args).items()
        if name in Settings.model_fields and value is not None
    }
    return Settings.load(getattr(args, "config", None), **given)
