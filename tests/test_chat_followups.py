"""Follow-ups read as a person reads them, through `/v1/chat/completions` on `mmrag serve`.

Each row is a conversation users had (issue 32): the follow-up was resolved about "Tell",
"Describe the Kell Bridge.", "Please" or "I'm", and answered from another building's source.
Now the question the answer gives as `question` is the one a reader would ask, and the answer
cites the source that holds the fact.
"""

from __future__ import annotations

import openai
import pytest

ANSWERED = {"role": "assistant", "content": "Here is what the sources say [1]."}
BLUE_DOOR, UPPER_FLOOR, KELL_PHOTO = "30000006", "30000007", "30000106"
HARBOR_INN_BUILT = "025ff87c44df8a13d4f398ee4b5c1a95"
DUNMORE_POPULATION = "a5aec7978306d03bf38b2ffc80a4df5a"
SARNIA_FLAG = {"30000055", "cfe7a42a5b0c691d6c32fb0df0708bb1"}


@pytest.fixture(scope="module")
def client(served_hybrid_index: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{served_hybrid_index}/v1", api_key="unused", max_retries=0)


def follow_up(client: openai.OpenAI, first: str, second: str) -> dict:
    [model] = client.models.list().data
    completion = client.chat.completions.create(
        model=model.id,
        messages=[
            {"role": "user", "content": first},
            ANSWERED,
            {"role": "user", "content": second},
        ],
    )
    return completion.model_dump()


@pytest.mark.parametrize(
    ("first", "second", "resolved", "gold"),
    [
        (
            "Tell me about the Harbor Inn.",
            "What color is its door?",
            "What color is the Harbor Inn's door?",
            {BLUE_DOOR},
        ),
        (
            "Describe the Kell Bridge.",
            "How many arches does it have?",
            "How many arches does the Kell Bridge have?",
            {KELL_PHOTO},
        ),
        (
            "Please describe the Harbor Inn.",
            "How many windows does it have on the upper floor?",
            "How many windows does the Harbor Inn have on the upper floor?",
            {UPPER_FLOOR},
        ),
        (
            "I'm visiting Dunmore. What is it known for?",
            "How many inhabitants does it have?",
            "How many inhabitants does Dunmore have?",
            {DUNMORE_POPULATION},
        ),
        (
            "Tell me about the Harbor Inn.",
            "Thanks! How many windows does it have on the upper floor?",
            "How many windows does the Harbor Inn have on the upper floor?",
            {UPPER_FLOOR},
        ),
        (
            "Tell me about the Harbor Inn.",
            "OK. Who built it?",
            "Who built the Harbor Inn?",
            {HARBOR_INN_BUILT},
        ),
    ],
    ids=["tell-me-about", "describe", "please", "im-visiting", "thanks", "ok"],
)
def test_a_follow_up_is_resolved_about_the_topic_a_reader_carries(
    client, first, second, resolved, gold
):
    answered = follow_up(client, first, second)
    assert answered["question"] == resolved
    cited = {citation["source_id"] for citation in answered["citations"]}
    if gold is not None:
        assert cited & gold, (answered["choices"][0]["message"]["content"], cited)


def test_an_open_request_carries_its_thing_with_what_it_is_of(client):
    answered = follow_up(client, "Show me the flag of Sarnia.", "What animal is on it?")
    assert answered["question"] == "What animal is on the flag of Sarnia?"
    cited = {citation["source_id"] for citation in answered["citations"]}
    assert cited <= SARNIA_FLAG  # the flag's own sources, or nothing: it shows no animal


def test_a_question_complete_on_its_own_is_left_as_it_was(client):
    question = "Which lake is the deepest in the world?"
    answered = follow_up(client, "What color is the door of the Harbor Inn?", question)
    assert answered["question"] == question
    cited = {citation["source_id"] for citation in answered["citations"]}
    assert BLUE_DOOR not in cited and UPPER_FLOOR not in cited
