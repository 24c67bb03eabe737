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
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import sign_jpeg

DOOR = "What color is the door of the Harbor Inn?"
WINDOWS = "How many windows does it have on the upper floor?"
BRIDGE = "Which river does the Kell Bridge cross?"
LLM = str(Path(sys.executable).parent / "llm")  # Simon Willison's CLI, installed in the venv
REPLACED = ("extractive", "declined")  # attributions of a sentence the model did not write


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
    """The same content, footnotes included, and the same token counts as the completion:
    with `stream_options.include_usage` a last chunk without choices carries the usage."""
    whole = ask(client, model, user(DOOR))
    stream = client.chat.completions.create(
        model=model, messages=[user(DOOR)], stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk.model_dump() for chunk in stream]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks[:-1])
    assert text == whole["choices"][0]["message"]["content"]
    grounded, counted = chunks[-2], chunks[-1]
    assert grounded["choices"][0]["finish_reason"] == "stop"
    assert grounded["citations"] == whole["citations"] and grounded["question"] == DOOR
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert counted["choices"] == [] and counted["usage"] == whole["usage"]
    assert all(chunk["usage"] is None for chunk in chunks[:-1])
    usage = whole["usage"]
    assert usage["prompt_tokens"] > 50 and usage["completion_tokens"] > 0  # sources and answer
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def footnoted(content: str) -> tuple[str, list[str]]:
    """The answer and its footnote lines."""
    answer, heading, block = content.partition("\n\nSources:\n")
    assert heading, content
    return answer, block.split("\n")


def test_plain_text_clients_see_the_cited_sources_after_the_answer(server, client, model) -> None:
    """Issue 32: a client that shows the content alone shows each cited source's marker,
    title and page; `sources_in_content: false` (for clients that render `citations`) leaves
    the answer alone."""
    completion = ask(client, model, user(DOOR))
    answer, footnotes = footnoted(completion["choices"][0]["message"]["content"])
    by_id = {source["source_id"]: source for source in completion["sources"]}
    cited = sorted({(c["marker"], c["source_id"]) for c in completion["citations"]})
    assert cited and len(footnotes) == len(cited)
    for line, (marker, source_id) in zip(footnotes, cited, strict=True):
        source = by_id[source_id]
        link = source["url"] or f"{server}{source['image_url']}"
        assert line == f"[{marker}] {source['title']} — {link}", line
        assert f"[{marker}]" in answer
    assert any("Harbor Inn" in line for line in footnotes), footnotes
    bare = ask(client, model, user(DOOR), extra_body={"sources_in_content": False})
    assert bare["choices"][0]["message"]["content"] == answer


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


def test_an_agent_frameworks_messages_are_read_as_the_conversation(client, model) -> None:
    """Issue 30, finding 6: a tool round (an assistant's `tool_calls`, the `tool` result), an
    assistant's refusal, an image sent alone and base64 wrapped at 76 columns (the `base64`
    tool's default) were each a 400. They are conversation now: the question is still the
    user's, a tool's result and a refusal are context, and a photo sent after its question is
    the photo that question asks about."""
    lookup = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "search", "arguments": '{"q": "Harbor Inn"}'},
    }
    agent = [
        {"role": "system", "content": "You are a helpful agent."},
        user(DOOR),
        {"role": "assistant", "content": None, "tool_calls": [lookup]},
        {"role": "tool", "tool_call_id": "call_1", "content": "The Harbor Inn is on the quay."},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot browse."}]},
        {"role": "assistant", "content": None, "refusal": "I cannot say more."},
        user(BRIDGE),
        {"role": "assistant", "content": None, "tool_calls": [lookup]},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "ok"}]},
    ]
    answered = ask(client, model, *agent)
    assert answered["question"] == BRIDGE  # the user's, not the tool's
    assert any("Kell Bridge" in text for text in cited_texts(answered)), answered

    encoded = base64.b64encode(sign_jpeg("FRESH BREAD", "OPEN 8 TO 6")).decode()
    wrapped = "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
    image = {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{wrapped}"}}
    asked = ask(client, model, user("What does the sign say?"), user([image]))
    assert asked["question"] == "What does the sign say?"
    [upload] = [s for s in asked["sources"] if s["source_id"].startswith("upload-")]
    assert "FRESH" in upload["ocr_text"]
    alone = ask(client, model, user([image]))
    assert alone["question"] == "What does this image show?"
    assert alone["sources"][0]["source_id"].startswith("upload-")


def test_max_tokens_bounds_the_models_tokens_and_says_when_the_content_is_not_its(
    client, model
) -> None:
    """Issue 30, finding 8: `max_tokens: 1` returned a 24-word sentence without a word why.
    The model writes at most max_tokens (usage says so); a sentence it did not write (the
    source's sentence, or the decline, in place of its unsupported one) is not cut, and
    `max_tokens_note` says so; the model's own sentence cut short ends with "length"."""
    completion = ask(client, model, user(DOOR), max_tokens=1)
    assert completion["usage"]["completion_tokens"] <= 1
    choice = completion["choices"][0]
    if completion["attribution"] in REPLACED:
        note = completion["max_tokens_note"]
        assert note and "max_tokens 1" in note and "\n" not in note, completion
        assert choice["finish_reason"] == "stop"
    else:
        assert completion["max_tokens_note"] is None and choice["finish_reason"] == "length"
    roomy = ask(client, model, user(DOOR), max_tokens=64)
    assert roomy["choices"][0]["finish_reason"] == "stop"  # one sentence, well within
    assert (roomy["max_tokens_note"] is None) == (roomy["attribution"] not in REPLACED)


BAD = {
    "no user turn": ({"messages": [assistant("Hello.")]}, 400, "the last message"),
    "a wrong role": ({"messages": [{"role": "robot", "content": "x"}]}, 400, "role"),
    "nobody asks": ({"messages": [{"role": "tool", "content": "42"}]}, 400, "the last message"),
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


NOT_SERVED = {
    "three choices": ({"n": 3}, "n: only one choice is written, got 3"),
    "JSON output": ({"response_format": {"type": "json_object"}}, "response_format: only"),
    "log probabilities": ({"logprobs": True}, "logprobs"),
    "a logit bias": ({"logit_bias": {"50256": -100}}, "logit_bias"),
    "a forced tool call": ({"tool_choice": "required"}, "tool_choice"),
    "audio": ({"modalities": ["text", "audio"]}, "modalities"),
    "five stop sequences": ({"stop": ["a", "b", "c", "d", "e"]}, "stop: at most 4"),
    "zero-width spaces": ({"messages": [user("\u200b\u200b\u2060")]}, "has no text"),
}


def test_outputs_not_served_are_refused_not_half_served_and_stop_is_honoured(
    server: str, model: str
) -> None:
    """Issue 37: `n=3` returned one choice, `response_format` prose, `stop` was ignored and a
    question of zero-width characters was answered."""

    def post(**body) -> httpx.Response:
        body = {"model": model, "messages": [user(DOOR)], **body}
        return httpx.post(f"{server}/v1/chat/completions", json=body, timeout=120)

    for name, (body, fragment) in NOT_SERVED.items():
        reply = post(**body)
        assert reply.status_code == 400, (name, reply.text)
        assert fragment in reply.json()["error"]["message"], (name, reply.text)
    served = post(n=1, response_format={"type": "text"}, tool_choice="none", logprobs=False)
    assert served.status_code == 200, served.text
    content = served.json()["choices"][0]["message"]["content"]
    assert "\n\nSources:\n[1]" in content  # the answer, then its footnotes
    stopped = post(stop=["Sources:", "never said"]).json()
    cut = stopped["choices"][0]["message"]["content"]
    assert "Sources:" not in cut and "[1]" in cut and cut.endswith("\n\n")  # the answer only
    assert stopped["choices"][0]["finish_reason"] == "stop" and stopped["citations"]


def counted(server: str, name: str) -> float:
    """The sum of a metric's samples in /metrics (all its labels)."""
    text = httpx.get(f"{server}/metrics", timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    )


def test_a_dropped_stream_frees_the_engine_and_is_counted_as_dropped_not_answered(
    server: str, client, model
) -> None:
    """Issue 30, finding 10: 30 streams whose clients left were counted as 30 `verified`
    answers. An answer is counted once its client has it; a stream left is counted as one."""
    answers, dropped = (
        counted(server, "mmrag_answers_total"),
        counted(server, "mmrag_dropped_streams_total"),
    )
    body = {"model": model, "messages": [user(DOOR)], "stream": True}
    with httpx.stream("POST", f"{server}/v1/chat/completions", json=body, timeout=60) as reply:
        first = next(reply.iter_lines())
        assert json.loads(first.removeprefix("data: "))["choices"][0]["delta"]["role"]
    deadline = time.monotonic() + 60
    while counted(server, "mmrag_dropped_streams_total") == dropped:
        assert time.monotonic() < deadline, "the dropped stream was never counted"
        time.sleep(0.1)
    assert counted(server, "mmrag_answers_total") == answers
    # The client left after the first chunk; the next question is answered, and counted.
    assert "[1]" in ask(client, model, user(DOOR))["choices"][0]["message"]["content"]
    assert counted(server, "mmrag_answers_total") == answers + 1
    metrics = httpx.get(f"{server}/metrics", timeout=10).text
    assert 'route="/v1/chat/completions",status="200"' in metrics
    assert 'status="500"' not in metrics


def test_the_llm_cli_prints_a_cited_answer_with_its_sources_and_follows_up(
    server: str, model: str, tmp_path: Path
) -> None:
    """Issue 30, finding 5: Simon Willison's `llm` failed with `--no-stream` ("'NoneType'
    object has no attribute 'model_dump'": no `usage`) and logged no tokens. Issue 32: its
    user saw bare markers. Configured for the served model as `llm` documents it for an
    OpenAI-compatible server, it prints the cited answer with its sources listed, follows up
    with `-c` (streamed, as `llm` streams by default), and logs the generator's tokens."""
    home = tmp_path / "llm-home"
    home.mkdir()
    (home / "extra-openai-models.yaml").write_text(
        f"- model_id: mmrag\n  model_name: {model}\n  api_base: {server}/v1\n"
    )
    env = {**os.environ, "LLM_USER_PATH": str(home)}
    env.pop("OPENAI_API_KEY", None)

    def llm(*args: str) -> str:
        done = subprocess.run(
            [LLM, *args], env=env, capture_output=True, text=True, timeout=180, check=False
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        return done.stdout.strip()

    answer, footnotes = footnoted(llm("-m", "mmrag", "--no-stream", DOOR))
    assert "[1]" in answer and "blue" in answer.lower(), answer
    assert any(line.startswith("[1] ") and "Harbor Inn" in line for line in footnotes), footnotes
    follow_up, more = footnoted(llm("-c", WINDOWS))
    assert re.search(r"\[\d\]", follow_up) and more, (follow_up, more)
    for line in more:
        assert re.match(r"\[\d+\] \S.* — https?://", line), line
    logged = json.loads(llm("logs", "-n", "2", "--json"))
    assert len(logged) == 2
    assert all(entry["input_tokens"] > 0 and entry["output_tokens"] > 0 for entry in logged)
