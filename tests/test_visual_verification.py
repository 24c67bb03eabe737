"""A claim cited to a photo is checked against its pixels when the engine sees images.

The Old Mill's caption never says its door is green: only the photo does. A VLM that sees it
answers "green [n]", and the verifier, reading the caption alone, used to decline that answer
as invented. Now a judge that sees the image decides: its "yes" keeps the citation of the
photo, its "no" declines, in `mmrag ask`, `/v1/answer` and `mmrag eval run webqa`; with an
engine that cannot see images nothing changes.

The VLM is tests/openai_recorder.py: a real OpenAI-compatible HTTP server on loopback that
records each request and answers from a script, because no vision-language weights can be had
on these machines; it lets the tests check that the judge's request carries the photo's bytes
and the claim. The in-process path runs a tiny random LLaVA through the transformers engine.
"""

from __future__ import annotations

import base64
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image, ImageDraw

from mmrag.generation.prompts import ANSWER_SYSTEM, JUDGE_SYSTEM, SUPPORT_SYSTEM
from mmrag.generation.verification.verifier import SUPPORTED, LexicalVerifier
from tests.helpers import image_fact, run_mmrag, running_mmrag_server, text_fact, write_imgs_tsv
from tests.openai_recorder import Recorder, image_urls, recording_server

QUESTION = "What colour is the door of the Old Mill in Hartwell?"
CAPTION = "The entrance of the Old Mill in Hartwell, seen from the lane."
MILL_ID = 30000000
CLAIM = "The door of the Old Mill is green"


def door_photo(door: str) -> bytes:
    """A stone wall with a door of the given colour: what the caption leaves unsaid."""
    image = Image.new("RGB", (160, 120), (150, 140, 125))
    ImageDraw.Draw(image).rectangle((60, 30, 100, 119), fill=door)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


GREEN_DOOR = door_photo("green")


@pytest.fixture(scope="module")
def mill(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A WebQA release in miniature: the Old Mill question, its photo, and a snippet about the
    mill that says nothing of its door; indexed with BM25."""
    from mmrag.indexes.collection import build_index

    folder = tmp_path_factory.mktemp("mill")
    corpus = {
        "q-mill": {
            "Guid": "q-mill",
            "Q": QUESTION,
            "A": ["The door of the Old Mill in Hartwell is green."],
            "Keywords_A": "green",
            "Qcate": "color",
            "split": "val",
            "topic": "buildings",
            "img_posFacts": [image_fact(MILL_ID, "Old Mill, Hartwell", CAPTION)],
            "img_negFacts": [],
            "txt_posFacts": [],
            "txt_negFacts": [
                text_fact(
                    "s-mill",
                    "Hartwell",
                    "Hartwell is a village on the river Ashby. The Old Mill in Hartwell was "
                    "built in 1820 by the Ashby family.",
                )
            ],
        }
    }
    data = folder / "WebQA_mill.json"
    data.write_text(json.dumps(corpus))
    images = write_imgs_tsv(folder, {MILL_ID: GREEN_DOOR})
    index = folder / "index"
    build_index([data], index, images=images)
    return {"data": data, "images": images, "index": index, "root": folder}


def mill_number(body: dict[str, Any]) -> int:
    """The number the prompt gives the mill's photo, as a model reading it would cite it."""
    text = " ".join(
        part if isinstance(part, str) else part.get("text", "")
        for message in body["messages"]
        for part in (
            [message["content"]] if isinstance(message["content"], str) else message["content"]
        )
    )
    found = re.search(r"\[(\d+)\] Old Mill, Hartwell \(image caption\)", text)
    assert found, text
    return int(found.group(1))


def vlm(verdict: str) -> Callable[[dict[str, Any]], str]:
    """A VLM that sees the green door: it answers so, and judges the claim as `verdict`."""

    def reply(body: dict[str, Any]) -> str:
        system = body["messages"][0]["content"]
        if system == SUPPORT_SYSTEM:
            return verdict
        if system == JUDGE_SYSTEM:
            return "yes"
        assert system == ANSWER_SYSTEM, system
        return f"{CLAIM} [{mill_number(body)}]."

    return reply


def judge_requests(server: Recorder) -> list[dict[str, Any]]:
    return [b for b in server.chat_requests() if b["messages"][0]["content"] == SUPPORT_SYSTEM]


def decoded(url: str) -> bytes:
    header, _, payload = url.partition(",")
    assert header == "data:image/jpeg;base64", header
    return base64.b64decode(payload)


def ask(mill: dict[str, Path], server: Recorder, *flags: str, question: str = QUESTION) -> dict:
    result = run_mmrag(
        "ask", question, "--index", str(mill["index"]), "--engine", "openai",
        "--base-url", server.url, "--json", *flags,
    )  # fmt: skip
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return json.loads(result.stdout)


def the_photo_is_cited(response: dict, support: float) -> None:
    assert response["attribution"] == "model" and not response["abstained"], response
    assert response["answer_without_markers"] == f"{CLAIM}."
    [citation] = response["citations"]
    assert citation["source_id"] == str(MILL_ID) and citation["modality"] == "image"
    assert citation["judged_by"] == "image"
    assert citation["support"] == pytest.approx(support, abs=0.01)


def test_ask_keeps_the_photos_citation_when_the_judge_sees_the_claim(mill) -> None:
    with recording_server(vlm("yes")) as server:
        response = ask(mill, server, "--vision")
    the_photo_is_cited(response, support=0.82)  # the recorder's P("yes") for a "yes"
    [request] = judge_requests(server)
    assert [decoded(url) for url in image_urls(request)] == [GREEN_DOOR]  # the pixels
    asked = request["messages"][-1]["content"]
    said = " ".join(part["text"] for part in asked if part["type"] == "text")
    assert f"Claim: {CLAIM}." in said and f"Question: {QUESTION}" in said
    assert CAPTION in said  # the caption, as context


def test_ask_declines_when_the_judge_denies_what_the_photo_shows(mill) -> None:
    with recording_server(vlm("no")) as server:
        response = ask(mill, server, "--vision")
    assert response["attribution"] == "declined" and response["abstained"], response
    assert response["citations"] == []
    assert len(judge_requests(server)) == 1  # the photo, judged once for the model's claim


def test_without_vision_nothing_changes_the_caption_alone_is_read(mill) -> None:
    """A text-only engine: no judge is asked, and the caption, which never says green, does
    not support the claim, as before."""
    with recording_server(vlm("yes")) as server:
        response = ask(mill, server)
    assert judge_requests(server) == []
    assert all(image_urls(body) == [] for body in server.chat_requests())
    assert response["attribution"] == "declined" and response["abstained"], response


def test_a_server_without_token_probabilities_is_judged_by_its_reply(mill) -> None:
    with recording_server(vlm("yes"), logprobs=False) as server:
        response = ask(mill, server, "--vision")
    the_photo_is_cited(response, support=1.0)
    # Asked for logprobs once, then for a plain reply from then on.
    asked = [bool(body.get("logprobs")) for body in judge_requests(server)]
    assert asked == [True, False]


def test_text_claims_keep_their_text_verdict_and_the_sentence_that_supports_them(mill) -> None:
    """A claim cited to a snippet is verified by its text, with or without a judge that sees,
    and its citation points at the supporting sentence."""

    def reply(body: dict[str, Any]) -> str:
        if body["messages"][0]["content"] != ANSWER_SYSTEM:
            return "no"
        text = json.dumps(body["messages"])
        number = re.search(r"\[(\d+)\] Hartwell \(text\)", text)
        assert number, text
        return f"The Old Mill in Hartwell was built in 1820 [{number.group(1)}]."

    snippet = "Hartwell is a village on the river Ashby. The Old Mill in Hartwell was built in 1820"
    with recording_server(reply) as server:
        response = ask(
            mill, server, "--vision", question="When was the Old Mill in Hartwell built?"
        )
    assert judge_requests(server) == []  # the snippet is text: no judge is asked
    [citation] = response["citations"]
    assert citation["source_id"] == "s-mill" and citation["judged_by"] == "text"
    # A probability from generation/verification/weights.json, from which a source supports
    # its claim.
    assert citation["support"] >= SUPPORTED
    text = next(s["text"] for s in response["sources"] if s["source_id"] == "s-mill")
    assert text.startswith(snippet)
    start, end = citation["span"]["start"], citation["span"]["end"]
    assert text[start:end] == "The Old Mill in Hartwell was built in 1820 by the Ashby family."


@pytest.mark.parametrize("verdict", ["yes", "no"])
def test_the_api_and_the_eval_run_judge_the_photo_alike(mill, tmp_path: Path, verdict) -> None:
    """The same photo, the same claim: kept when the judge sees it, not when it denies it, in
    `/v1/answer` (declined) and `eval run webqa` (kept uncited: eval runs never decline)."""
    with recording_server(vlm(verdict)) as server:
        flags = ("--engine", "openai", "--base-url", server.url, "--vision")
        log = tmp_path / "serve.log"
        with running_mmrag_server(mill["index"], log, *flags) as base:
            answered = httpx.post(f"{base}/v1/answer", json={"question": QUESTION}, timeout=60)
        assert answered.status_code == 200, log.read_text()[-2000:]
        if verdict == "yes":
            the_photo_is_cited(answered.json(), support=0.82)
        else:
            assert answered.json()["abstained"] and answered.json()["citations"] == []

        out = tmp_path / "preds.json"
        run = run_mmrag(
            "eval", "run", "webqa", "--data", str(mill["data"]), "--images", str(mill["images"]),
            "--index", str(mill["index"]), "--out", str(out), *flags,
        )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(out.read_text())["q-mill"]["answer"] == f"{CLAIM}."
    report = out.with_name("preds.report.md").read_text()
    origin = {
        "yes": "cited by the model, each citation verified",  # the judge saw it
        "no": "kept uncited: no source supports it (--abstain never)",
    }[verdict]
    assert f"| {origin} | 1 | 100.00 |" in report, report


def test_an_attached_photo_is_judged_before_its_text_is_read(mill, tmp_path: Path) -> None:
    """ "Ask about your photo": the upload is source [1], judged by its pixels as any image."""
    photo = tmp_path / "door.jpg"
    photo.write_bytes(GREEN_DOOR)

    def reply(verdict: str) -> Callable[[dict[str, Any]], str]:
        def answer(body: dict[str, Any]) -> str:
            if body["messages"][0]["content"] == SUPPORT_SYSTEM:
                return verdict
            return "The door in the photo is green [1]."

        return answer

    question = "What colour is the door in this photo?"
    for verdict, kept in (("yes", True), ("no", False)):
        with recording_server(reply(verdict)) as server:
            response = ask(mill, server, "--vision", "--image", str(photo), question=question)
        [request] = judge_requests(server)
        assert [decoded(url) for url in image_urls(request)] == [GREEN_DOOR]
        if kept:
            [citation] = response["citations"]
            assert citation["source_id"].startswith("upload-") and citation["marker"] == 1
            assert citation["judged_by"] == "image"
        else:  # no text in the photo to read the answer off: declined
            assert response["abstained"] and response["citations"] == [], response


def test_a_tiny_vlm_in_process_judges_from_the_pixels(tmp_path: Path) -> None:
    """The transformers engine's P("yes") through the same judge: a tiny random LLaVA whose
    output layer can only say "yes" or "no" (every other row zeroed), so that the judge always
    reads a verdict of the model's own; the next-token probabilities change with the image."""
    import torch
    from transformers import LlavaForConditionalGeneration

    from mmrag.generation import LMJudge, load_engine
    from mmrag.generation.prompts import support_messages
    from mmrag.generation.verification.attribution import Attributor
    from tests.test_generation_transformers import byte_tokenizer, save_llava

    tokenizer = byte_tokenizer()
    tokenizer.add_tokens(["yes", "no"])
    folder = save_llava(tmp_path / "llava", tokenizer)
    model = LlavaForConditionalGeneration.from_pretrained(folder)
    head = model.lm_head.weight.data
    direction = torch.randn(head.shape[1], generator=torch.Generator().manual_seed(1))
    head.zero_()
    head[tokenizer.convert_tokens_to_ids("yes")] = direction
    head[tokenizer.convert_tokens_to_ids("no")] = -direction
    model.save_pretrained(folder)
    engine = load_engine("transformers", str(folder), device="cpu")

    class Photo:
        id, modality, title, text = "mill", "image", "Old Mill, Hartwell", CAPTION

    tables = []
    for door in ("green", "red", "blue"):
        data = door_photo(door)
        judge = LMJudge(engine, images=lambda _source, data=data: data)
        judged = Attributor(LexicalVerifier(), judge=judge).judgement(QUESTION, CLAIM, Photo())
        assert judged.judged_by == "image" and judged.score in (0.0, 1.0), judged
        assert judged.supported == (judged.score == 1.0)
        messages = support_messages(QUESTION, CLAIM, Photo(), image=data)
        table = engine.next_token_logprobs(messages, top_k=20)
        tables.append({token: round(logprob, 5) for token, logprob in table.items()})
    assert tables[0] != tables[1] and tables[1] != tables[2], tables  # the pixels count
