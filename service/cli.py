"""The `mmrag` command. Sub-commands live in `service/commands/`; each imports its heavy
dependencies only when run, and only the command named is registered, so `mmrag search` does
not import the eval runs (0.25 s) and `mmrag --help` stays instant.

Bad input is reported as one line on stderr with a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from mmrag.generation.errors import GenerationError
from mmrag.indexes.errors import InputError

EXIT_INPUT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """A command line argparse cannot parse."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line ("mmrag search: error: ...") not a usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: error: {message} (see --help)")


# The commands, in the order `mmrag --help` lists them.
COMMANDS = ("index", "search", "retrieval", "ask", "chat", "rationale", "ground", "serve", "eval")


def command_module(name: str) -> ModuleType:
    """The module that registers command `name` (imported only when that command runs)."""
    if name == "eval":
        from mmrag.evaluation import cli as evaluation

        return evaluation
    return importlib.import_module(f"mmrag.service.commands.{name}")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of the command `argv` names (of every command when it names none)."""
    parser = OneLineParser(
        prog="mmrag",
        description="Multimodal retrieval and cited-answer QA over image and text corpora.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    commands.required = True
    named = next((arg for arg in argv or () if not arg.startswith("-")), None)
    for name in [named] if named in COMMANDS else COMMANDS:
        command_module(name).register(commands)
    return parser


def not_utf8(text: str, name: str) -> InputError | None:
    """The error for text holding bytes that are not UTF-8, or None.

    Python keeps such bytes of a command line (and of a terminal outside a UTF-8 locale) as
    lone surrogates, which every tokenizer and UTF-8 writer refuses with a traceback: `mmrag
    ask $'door \\xff inn'` failed 44 lines deep in the embedder."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        byte = ord(text[exc.start]) - 0xDC00  # what surrogateescape keeps of byte 0x80-0xff
        shown = f"byte 0x{byte:02x}" if 0x80 <= byte <= 0xFF else "a lone surrogate"
        return InputError(f"{name}: {shown} at character {exc.start} is not UTF-8 text")
    return None


def check_text_arguments(args: argparse.Namespace) -> None:
    """Every text argument (a question, a choice, a model name) as UTF-8, before any work."""
    for name, value in vars(args).items():
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and (error := not_utf8(text, name.replace("_", "-"))):
                raise error


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser(argv).parse_args(argv)
        check_text_arguments(args)
        return int(args.run(args) or 0)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    except (InputError, GenerationError, OSError) as exc:
        print(f"mmrag: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    except KeyboardInterrupt:
        print("mmrag: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def native_work_in_flight() -> bool:
    """Whether a question's worker still runs (the pipeline is imported only if it ran)."""
    pipeline = sys.modules.get("mmrag.core.pipeline")
    return pipeline is not None and pipeline.runs_in_flight() > 0


def entry_point() -> NoReturn:
    """The `mmrag` command: `main`, then an exit that cannot abort.

    What an interrupted command promises (the partial file, the previous index) is kept by the
    time `main` returns. Finalising the interpreter then would only tear down threads that may
    be inside llama.cpp or onnxruntime, which the C++ runtime answers with an abort; so after
    Ctrl-C, or with a question's worker still running, the process ends at once instead, its
    output flushed.
    """
    code = main()
    if code == EXIT_INTERRUPTED or native_work_in_flight():
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError):  # a reader that left (`| head`)
                stream.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry_point()
