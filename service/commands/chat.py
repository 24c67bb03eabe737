"""`mmrag chat`: a conversation with an index in the terminal, streamed, with history.

Each question is answered with the turns before it, as the chat page and the OpenAI route
answer it: "How many windows does it have on the upper floor?" after a question about the
Harbor Inn is about the Harbor Inn. `/image PATH` attaches a photo to the conversation (source
[1] of every answer until `/new` or `/image` alone), `/new` starts afresh, Ctrl-D leaves.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mmrag.core.options import add_pipeline_options, settings_from

HELP = "/new starts a new conversation · /image PATH attaches a photo · Ctrl-D leaves"


def register(commands: argparse._SubParsersAction) -> None:
    chat = commands.add_parser(
        "chat", help="a conversation in the terminal: follow-ups are read with the history"
    )
    chat.add_argument("--index", type=Path, required=True)
    chat.add_argument("--image", type=Path, help="a photo to talk about, from the first question")
    add_pipeline_options(chat)
    chat.set_defaults(run=run_chat)


def run_chat(args: argparse.Namespace) -> int:
    from mmrag.core.api import OpenIndex
    from mmrag.indexes.errors import InputError
    from mmrag.service.commands.ask import print_answer
    from mmrag.service.schemas import AnswerResponse

    index = OpenIndex(settings_from(args))
    conversation = index.conversation(args.image)
    index.pipeline  # noqa: B018  (the models load before the first prompt, not after it)
    print(f"mmrag chat on {index.settings.index.name}: {HELP}", file=sys.stderr)
    while True:
        try:
            line = input("> ").strip()
        except EOFError:
            print(file=sys.stderr)
            return 0
        if not line:
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
