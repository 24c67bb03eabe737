"""Follow-ups answered with the conversation: the offline resolver, `mmrag chat` in a terminal,
and the README's Python example, run as written.

"How many windows does it have on the upper floor?" after a question about the Harbor Inn was
answered alone, from the Heron Lodge's six windows: a confident, cited answer about another
building. Now it is answered as the question it stands for.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mmrag.core.conversation import LLMResolver, RuleResolver, named_things
from mmrag.generation.types import Turn
from tests.helpers import MMRAG, REPO

DOOR = "What color is the door of the Harbor Inn?"
WINDOWS = "How many windows does it have on the upper floor?"
BRIDGE = "Which river does the Kell Bridge cross?"


def after(*questions: str, answer: str = "It is so [1].") -> list[Turn]:
    turns = []
    for question in questions:
        turns += [Turn("user", question), Turn("assistant", answer)]
    return turns


@pytest.mark.parametrize(
    ("earlier", "question", "resolved"),
    [
        ([DOOR], WINDOWS, "How many windows does the Harbor Inn have on the upper floor?"),
        ([DOOR], "Who built it?", "Who built the Harbor Inn?"),
        ([DOOR], "When was its roof built?", "When was the Harbor Inn's roof built?"),
        ([DOOR], "And the roof?", "What color is the roof of the Harbor Inn?"),
        ([DOOR], "Is the roof the same colour?", "Is the roof of the Harbor Inn the same colour?"),
        (
            [DOOR],
            "How many windows are on the upper floor?",
            "How many windows are on the upper floor of the Harbor Inn?",
        ),
        (
            ["When was the lighthouse of Dunmore built?"],
            "What is the population there?",
            "What is the population in Dunmore?",
        ),
        (
            [DOOR],
            "Is it older than the Kell Bridge?",
            "Is the Harbor Inn older than the Kell Bridge?",
        ),
        (
            ["What colours is the Lantern Bakery's awning?"],
            "How many people does it employ?",
            "How many people does the Lantern Bakery employ?",
        ),
        # The topic follows the conversation: the latest named thing.
        (
            [DOOR, "Which river does the Kell Bridge cross?"],
            "When was it built?",
            "When was the Kell Bridge built?",
        ),
    ],
)
def test_a_follow_up_that_refers_back_or_leaves_its_subject_out_is_made_whole(
    earlier: list[str], question: str, resolved: str
) -> None:
    assert RuleResolver().resolve(after(*earlier), question) == resolved


@pytest.mark.parametrize(
    "question",
    [
        "Which river does the Kell Bridge cross?",  # names its own thing
        "What is the Kell Bridge made of, and when was it built?",  # "it" is its own name
        "Who won the 1998 football world cup?",  # a date of its own
    ],
)
def test_a_new_topic_is_not_polluted_by_the_old_one(question: str) -> None:
    assert RuleResolver().resolve(after(DOOR, WINDOWS), question) == question


def test_the_topic_comes_from_the_answer_when_the_question_named_none() -> None:
    turns = [
        Turn("user", "what color is the door?"),
        Turn("assistant", "The door of the Harbor Inn is blue [1]."),
    ]
    assert RuleResolver().resolve(turns, "Who built it?") == "Who built the Harbor Inn?"


def conversation(*said: str) -> list[Turn]:
    """Turns as written, user and assistant in turn."""
    return [Turn("user" if n % 2 == 0 else "assistant", text) for n, text in enumerate(said)]


@pytest.mark.parametrize(
    ("turns", "question", "resolved"),
    [
        (  # "the town" is the place the conversation is in, and "its" is the town's after it
            conversation(
                "I'm visiting Greywick. Which river flows through the town?",
                "The River Grey flows through Greywick, whose economy depends on slate [2].",
                "When was the town granted a market charter?",
                "Greywick was granted a market charter in 1242 [1].",
            ),
            "What colour is the shield on its coat of arms?",
            "What colour is the shield on Greywick's coat of arms?",
        ),
        (  # the thing the last question asked of, as its answer names it
            conversation(
                "I'm visiting Alder Vale. When is the spring fair held?",
                "The Alder Vale Spring Fair is held in April [1].",
            ),
            "What are its highlights?",
            "What are the Alder Vale Spring Fair's highlights?",
        ),
        (  # "the post office" is the Greywick Post Office, not a post office of it
            conversation(
                "Tell me about the Greywick Post Office.",
                "The Greywick Post Office is a post office on Market Square in Greywick [2].",
            ),
            "What is the post office known for?",
            "What is the Greywick Post Office known for?",
        ),
        (  # "that river" is the one an earlier answer named, not only the last
            conversation(
                "Which river does the Mill Bridge span?",
                "The Mill Bridge carries the old coach road across the River Alder [2].",
                "Who was its engineer?",
                "The Mill Bridge was built by the engineer Maud Corrigan [2].",
            ),
            "How long is that river?",
            "How long is the River Alder?",
        ),
    ],
    ids=["the-town-in-greywick", "the-fair-the-answer-named", "the-post-office", "that-river"],
)
def test_a_follow_up_names_what_the_conversation_named(turns, question, resolved) -> None:
    assert RuleResolver().resolve(turns, question) == resolved


def test_without_a_named_thing_nothing_is_carried() -> None:
    """A photo's conversation ("What does the sign say?" then "When does it open?") keeps its
    words: the photo itself stays attached, and it is what the question is about. The words
    the answer quotes off the sign are no name to carry."""
    turns = after("What does the sign say?", answer='The text in the image reads "BREAD" [1].')
    assert RuleResolver().resolve(turns, "When does it open?") == "When does it open?"
    assert RuleResolver().resolve(turns, "When does the shop open?") == "When does the shop open?"


def test_names_are_read_as_written_with_their_article() -> None:
    assert named_things("What shape is the window of St. Brigid's Church?") == [
        "St. Brigid's Church"
    ]
    assert named_things("Which is taller, the Kell Bridge or the Salt Hollow Lighthouse?") == [
        "the Kell Bridge",
        "the Salt Hollow Lighthouse",
    ]


def test_the_llm_rewrite_asks_the_generator_and_falls_back_to_the_rules(llama_server) -> None:
    """`--rewrite llm`: the conversation goes in the prompt and the reply is the question; a
    blank reply gives the rules' question (scripted replies from the recording server, then the
    packaged SmolLM2 behind a real llama.cpp server, whose rewrite varies but is one line)."""
    from mmrag.generation.engines import load_engine
    from tests.openai_recorder import recording_server

    with recording_server(lambda _body: "How many windows does the Harbor Inn have?") as server:
        resolver = LLMResolver(load_engine("openai", base_url=server.url))
        assert (
            resolver.resolve(after(DOOR), WINDOWS) == "How many windows does the Harbor Inn have?"
        )
        [request] = server.chat_requests()
        assert (
            DOOR in request["messages"][-1]["content"]
            and WINDOWS in request["messages"][-1]["content"]
        )
    with recording_server(lambda _body: "   ") as server:
        resolver = LLMResolver(load_engine("openai", base_url=server.url))
        assert resolver.resolve(after(DOOR), WINDOWS) == RuleResolver().resolve(
            after(DOOR), WINDOWS
        )
    smollm = LLMResolver(load_engine("openai", base_url=llama_server))
    rewritten = smollm.resolve(after(DOOR), WINDOWS)
    assert rewritten and "\n" not in rewritten  # what SmolLM2 writes varies; one line it is


def test_mmrag_chat_answers_follow_ups_in_the_terminal(hybrid_index: Path) -> None:
    script = "\n".join([DOOR, WINDOWS, BRIDGE, "/new", WINDOWS, ""])
    result = subprocess.run(
        [*MMRAG, "chat", "--index", str(hybrid_index)],
        input=script,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    replies = result.stdout.split("(a new conversation)")
    assert len(replies) == 2, result.stdout
    with_history, afresh = replies
    resolved = "(answered as: How many windows does the Harbor Inn have on the upper floor?)"
    assert resolved in with_history
    windows_turn, bridge_turn = with_history.split(resolved, 1)[1].split("> ", 1)
    cited = [line for line in windows_turn.splitlines() if re.match(r"\s+\[\d\]", line)]
    assert cited and all("Harbor Inn" in line for line in cited), windows_turn
    assert "(answered as:" not in bridge_turn  # a new topic, answered on its own
    assert "(answered as:" not in afresh  # a new conversation has nothing to read it with


def test_the_readmes_python_example_runs_as_written(hybrid_index: Path, tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    block = readme.split("<!-- python-example:", 1)[1].split("```python\n", 1)[1]
    code = block.split("```", 1)[0]
    assert 'open_index("var/sample-index")' in code
    script = tmp_path / "example.py"
    script.write_text(code.replace("var/sample-index", str(hybrid_index)))
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "Kell Bridge" in lines[0]  # the best search hit
    assert "How many windows does the Harbor Inn have on the upper floor?" in lines
    assert any("[1]" in line and "blue" in line.lower() for line in lines), lines
