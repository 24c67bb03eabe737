"""The settings as command-line flags: each flag's type, choices and help come from its field
in `Settings`, and no flag has a default, so a flag left out never overrides an `MMRAG_*`
variable or the TOML file (flags > environment > file > defaults)."""

from __future__ import annotations

import argparse
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from mmrag.core.settings import Settings


def _unwrap_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        kept = [arg for arg in get_args(annotation) if arg is not type(None)]
        return kept[0] if len(kept) == 1 else annotation
    return annotation


def _choices(annotation: Any) -> tuple[str, ...] | None:
    return get_args(annotation) if get_origin(annotation) is Literal else None


def comma_list(choices: tuple[str, ...] | None):
    """A comma-separated value, each item checked against `choices` as argparse would."""

    def parse(value: str) -> list[str]:
        items = [item.strip() for item in value.split(",") if item.strip()]
        unknown = [item for item in items if choices and item not in choices]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"invalid choice: {unknown[0]!r} (choose from {', '.join(choices or ())})"
            )
        return items

    return parse


def setting_flag(parser: argparse.ArgumentParser, name: str, *flags: str, **extra: Any) -> None:
    """`--name` (or `flags`) for the setting `name`, typed and documented by its field."""
    field = Settings.model_fields[name]
    annotation = _unwrap_optional(field.annotation)
    options: dict[str, Any] = {"dest": name, "default": None}
    if get_origin(annotation) is list:
        item_choices = _choices(get_args(annotation)[0])
        options["type"] = comma_list(item_choices)
        options["metavar"] = ",".join(item_choices) if item_choices else "A,B"
    elif (choices := _choices(annotation)) is not None:
        options["choices"] = choices
    elif annotation is bool:
        options["action"] = argparse.BooleanOptionalAction
    elif annotation in (int, float, Path):
        options["type"] = annotation
    default = "" if field.default is None else f" (default: {field.default})"
    options["help"] = f"{field.description}{default}".replace("%", "%%")
    parser.add_argument(*(flags or [f"--{name.replace('_', '-')}"]), **options | extra)


def add_config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="TOML file of settings (MMRAG_* env overrides)")


def add_retrieval_options(parser: argparse.ArgumentParser) -> None:
    for name in ("retrievers", "fusion", "device"):
        setting_flag(parser, name)


def add_generation_options(parser: argparse.ArgumentParser) -> None:
    setting_flag(parser, "engine")
    setting_flag(parser, "model")
    setting_flag(parser, "engine_url", "--base-url")
    setting_flag(parser, "vision")
    setting_flag(parser, "max_tokens")


def add_grounding_options(parser: argparse.ArgumentParser) -> None:
    setting_flag(parser, "detector")
    setting_flag(parser, "grounder")


def add_pipeline_options(parser: argparse.ArgumentParser) -> None:
    add_config_option(parser)
    add_retrieval_options(parser)
    add_generation_options(parser)
    add_grounding_options(parser)
    for name in (
        "reranker",
        "threshold",
        "max_sources",
        "rerank_k",
        "verifier",
        "judge_engine",
        "judge_model",
        "judge_url",
        "judge_vision",
        "judge_text",
        "judge_timeout_s",
        "rewrite",
        "abstain",
        "guided_citations",
    ):
        setting_flag(parser, name)


def settings_from(args: argparse.Namespace) -> Settings:
    """The config file and MMRAG_* variables, overridden by whichever flags were given."""
    given = {
        name: value
        for name, value in vars(args).items()
        if name in Settings.model_fields and value is not None
    }
    return Settings.load(getattr(args, "config", None), **given)
