"""The `mmrag` command. Sub-commands live in `service/commands/`; each imports its heavy
dependencies only when run, so `mmrag --help` stays instant.

Bad input is reported as one line on stderr with a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mmrag.generation.errors import GenerationError
from mmrag.indexes.errors import InputError

EXIT_INPUT_ERROR = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """A command line argparse cannot parse."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line ("mmrag search: error: ...") not a usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: error: {message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    from mmrag.evaluation import cli as evaluation
    from mmrag.service.commands import ask, ground, index, rationale, retrieval, search, serve

    parser = OneLineParser(
        prog="mmrag",
        description="Multimodal retrieval and cited-answer QA over image and text corpora.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    commands.required = True
    for module in (index, search, retrieval, ask, rationale, ground, serve, evaluation):
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args.run(args) or 0)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    except (InputError, GenerationError, OSError) as exc:
        print(f"mmrag: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    except KeyboardInterrupt:
        print("mmrag: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
