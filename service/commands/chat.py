"""`mmrag chat`: a conversation with an index in the terminal, streamed, with history.

Each question is answered with the turns before it, as the chat page and the OpenAI route
answer it: "How many windows does it have on the upper floor?" after a question about the
Harbor Inn is about the Harbor Inn. `/image PATH` attaches a photo to the conversation (source
[1] of every answer until `/new` or `/image` alone), `/new` starts afresh, Ctrl-D leaves. Any
other line that starts with `/` is a mistyped command, told as such rather than asked.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mmrag.core.options import add_pipeline_options, settings_from

HELP = "/new starts a new conversation · /image PATH attaches a photo · /quit or Ctrl-D leaves"


def register(commands: argparse._SubParsersAction) -> None:
    chat = commands.add_parser(
        "chat", help="a conversation in the terminal: follow-ups are read with the history"
    )
    chat.add_argument("--index", type=Path, required=True)
    chat.add_argument("--image", type=Path, help="a photo to talk about, from the first question")
    add_pipeline_options(chat)
    chat.set_defaults(run=run_chat)


def read_line(prompt: str) -> str | None:
    """A line typed (or piped) in, None at the end. Decoded here, one line at a time, with
    bytes that are not UTF-8 kept as lone surrogates for the caller to refuse: `input()`
    decodes whatever its buffer holds, so one such byte in a UTF-8 locale raised for every
    line piped in with it."""
    print(prompt, end="", flush=True)
    raw = sys.stdin.buffer.readline()
    return raw.decode("utf-8", errors="surrogateescape") if raw else None


def run_chat(args: argparse.Namespace) -> int:
    from mmrag.core.api import OpenIndex
    from mmrag.indexes.errors import InputError
    from mmrag.service.cli import not_utf8
    from mmrag.service.commands.ask import print_answer
    from mmrag.service.schemas import AnswerResponse

    index = OpenIndex(settings_from(args))
    conversation = index.conversation(args.image)
    index.pipeline  # noqa: B018  (the models load before the first prompt, not after it)
    print(f"mmrag chat on {index.settings.index.name}: {HELP}", file=sys.stderr)
    while True:
        line = read_line("> ")
        if line is None:
            print(file=sys.stderr)
            return 0
        line = line.strip()
        if not line:
            continue
        if error := not_utf8(line, "your question"):
            print(f"mmrag: error: {error}", file=sys.stderr)
            continue
        if line in ("/quit", "/exit"):
            return 0
        if line == "/new":
            conversation.reset()
            print("(a new conversation)")
            continue
        if line == "/image" or line.startswith("/image "):
            path = line.removeprefix("/image").strip()
            try:
                conversation.image = index.photo(path) if path else None
            except (InputError, OSError) as exc:
                print(f"mmrag: error: {' '.join(str(exc).split())}", file=sys.stderr)
                continue
            print(f"(photo: {path})" if path else "(no photo)")
            continue
        if line.startswith("/"):
            command = line.split()[0]
            print(f"mmrag: error: no command {command}; {HELP}", file=sys.stderr)
            continue
        streamed: list[str] = []

        def show(token: str, streamed: list[str] = streamed) -> None:
            streamed.append(token)
            print(token, end="", flush=True)

        result = conversation.ask(line, on_token=show)
        print()
        response = AnswerResponse.from_result(result)
        if response.question != line:
            print(f"(answered as: {response.question})")
        print_answer(response, "".join(streamed))
