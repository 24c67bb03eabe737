"""The OpenAI chat protocol on `mmrag serve`, driven by the official `openai` SDK over loopback.

A client that speaks OpenAI's chat API (the SDK, Open WebUI, LibreChat) gets cited answers: the
content is the checked answer with its [n] markers, and the citations, sources and resolved
question travel beside it. A follow-up is answered from the conversation: "How many windows does
it have on the upper floor?" after the Harbor Inn's door is about the Harbor Inn, whose upper
floor has four sash windows; asked alone, it was answered from the Heron Lodge's six.
"""

from __future__ import annotations

import base64
import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from tests.helpers import sign_jpeg

DOOR = "What color is the door of the Harbor Inn?"
WINDOWS = "How many windows does it have on the upper floor?"
BRIDGE = "Which river does the Kell Bridge cross?"


@pytest.fixture(scope="module")
def server(served_hybrid_index: str) -> str:
    return served_hybrid_index


@pytest.fixture(scope="module")
def client(server: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def model(client: openai.OpenAI) -> str:
    [served] = client.models.list().data
    return served.id


def ask(client: openai.OpenAI, model: str, *messages: dict, **options) -> dict:
    """The completion as JSON, mmrag's fields (citations, sources, question) included."""
    completion = client.chat.completions.create(model=model, messages=list(messages), **options)
    return completion.model_dump()


def user(content) -> dict:
    return {"role": "user", "content": content}


def assistant(content: str) -> dict:
    return {"role": "assistant", "content": content}


def cited_texts(completion: dict) -> list[str]:
    by_id = {source["source_id"]: source for source in completion["sources"]}
    return [
        f"{by_id[c['source_id']]['title']} {by_id[c['source_id']]['text']}"
        for c in completion["citations"]
    ]


def test_the_model_list_names_the_index_and_an_answer_cites_its_source(client, model) -> None:
    assert model == "mmrag/index"  # the served index's directory
    completion = ask(client, model, user(DOOR))
    assert completion["object"] == "chat.completion" and completion["model"] == model
    content = completion["choices"][0]["message"]["content"]
    assert completion["choices"][0]["finish_reason"] == "stop"
    assert "[1]" in content and "blue" in content.lower(), content
    assert completion["question"] == DOOR and not completion["abstained"]
    # The citation supports the claim: the cited caption says the door is blue.
    assert any("blue" in text.lower() for text in cited_texts(completion)), completion


def test_a_streamed_answer_is_the_checked_answer_and_ends_with_its_grounding(client, model) -> None:
    whole = ask(client, model, user(DOOR))
    stream = client.chat.completions.create(model=model, messages=[user(DOOR)], stream=True)
    chunks = [chunk.model_dump() for chunk in stream]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks)
    assert text == whole["choices"][0]["message"]["content"]
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["citations"] == whole["citations"] and last["question"] == DOOR
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)


def test_a_follow_up_is_answered_from_the_source_the_conversation_is_about(client, model) -> None:
    first = ask(client, model, user(DOOR))
    door_answer = first["choices"][0]["message"]["content"]
    follow_up = ask(client, model, user(DOOR), assistant(door_answer), user(WINDOWS))
    assert "Harbor Inn" in follow_up["question"], follow_up["question"]
    cited = cited_texts(follow_up)
    assert cited and all("Harbor Inn" in text for text in cited), follow_up
    assert any("four sash windows" in text for text in cited)
    assert "4" in follow_up["choices"][0]["message"]["content"] or "four" in str(follow_up)
    # Asked alone, the same words are about whichever inn retrieval finds first.
    alone = ask(client, model, user(WINDOWS))
    assert alone["question"] == WINDOWS
    assert not any("Harbor Inn" in text for text in cited_texts(alone))
    # A new topic after it is answered on its own.
    later = [user(DOOR), assistant(door_answer), user(WINDOWS)]
    later += [assistant(follow_up["choices"][0]["message"]["content"]), user(BRIDGE)]
    bridge = ask(client, model, *later)
    assert bridge["question"] == BRIDGE
    assert any("Kell Bridge" in source["title"] for source in bridge["sources"]), bridge


def test_an_image_part_is_the_photo_asked_about_and_stays_in_the_conversation(
    client, model
) -> None:
    photo = base64.b64encode(sign_jpeg("FRESH BREAD", "OPEN 8 TO 6")).decode()
    image = {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{photo}"}}
    asked = user([{"type": "text", "text": "What does the sign say?"}, image])
    first = ask(client, model, asked)
    [upload] = [s for s in first["sources"] if s["source_id"].startswith("upload-")]
    assert first["sources"][0] == upload and "FRESH" in upload["ocr_text"]
    later = ask(
        client, model, asked, assistant(first["choices"][0]["message"]["content"]),
        user("When does the shop open?"),
    )  # fmt: skip
    assert later["sources"][0]["source_id"] == upload["source_id"]  # the same photo, [1]


BAD = {
    "no user turn": ({"messages": [assistant("Hello.")]}, 400, "the last message"),
    "a wrong role": ({"messages": [{"role": "tool", "content": "x"}]}, 400, "role"),
    "thousands of turns": (
        {"messages": [user("Hi?"), assistant("Hello.")] * 1500 + [user(DOOR)]},
        400,
        "more than 64",
    ),
    "a huge message": (
        {"messages": [user("x" * 50_000), assistant("No."), user(DOOR)]},
        400,
        "longer than 8000",
    ),
    "a bad data URL": (
        {
            "messages": [
                user(
                    [
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@"}},
                        {"type": "text", "text": "What is it?"},
                    ]
                )
            ]
        },
        400,
        "base64",
    ),
    "a URL to fetch": (
        {
            "messages": [
                user(
                    [
                        {"type": "text", "text": "What is it?"},
                        {"type": "image_url", "image_url": {"url": "http://example.org/x.jpg"}},
                    ]
                )
            ]
        },
        400,
        "data URLs",
    ),
    "an image that is not one": (
        {
            "messages": [
                user(
                    [
                        {"type": "text", "text": "What is it?"},
                        {
                            "type": "image_url",
                            "image_url": {"url": "data:image/png;base64,aGVsbG8="},
                        },
                    ]
                )
            ]
        },
        422,
        "image",
    ),
    "no such model": ({"model": "gpt-4o", "messages": [user(DOOR)]}, 404, "does not exist"),
    "a string for a count": ({"messages": [user(DOOR)], "max_tokens": "9"}, 400, "max_tokens"),
}


def test_bad_conversations_get_openai_errors_of_one_line_and_fail_alone(
    server: str, model: str
) -> None:
    def post(body: dict) -> httpx.Response:
        return httpx.post(f"{server}/v1/chat/completions", json={"model": model} | body, timeout=60)

    with ThreadPoolExecutor(4) as pool:
        neighbour = pool.submit(post, {"messages": [user(DOOR)]})
        replies = dict(zip(BAD, pool.map(post, [body for body, _, _ in BAD.values()]), strict=True))
    for name, (_, status, fragment) in BAD.items():
        reply = replies[name]
        assert reply.status_code == status, (name, reply.text)
        error = reply.json()["error"]
        assert fragment in error["message"] and "\n" not in error["message"], (name, error)
        assert error["type"] in ("invalid_request_error", "not_found_error"), error
    answered = neighbour.result()
    assert (
        answered.status_code == 200 and "[1]" in answered.json()["choices"][0]["message"]["content"]
    )


def test_a_dropped_stream_frees_the_engine_and_is_counted(server: str, client, model) -> None:
    body = {"model": model, "messages": [user(DOOR)], "stream": True}
    with httpx.stream("POST", f"{server}/v1/chat/completions", json=body, timeout=60) as reply:
        first = next(reply.iter_lines())
        assert json.loads(first.removeprefix("data: "))["choices"][0]["delta"]["role"]
    # The client left after the first chunk; the next question is answered.
    assert "[1]" in ask(client, model, user(DOOR))["choices"][0]["message"]["content"]
    metrics = httpx.get(f"{server}/metrics", timeout=10).text
    assert 'route="/v1/chat/completions",status="200"' in metrics
    assert 'status="500"' not in metrics
