"""Engines: errors a user can act on, a light import, and the OpenAI client against a real
llama.cpp server (the protocol `vllm serve` speaks too)."""

from __future__ import annotations

import importlib.util
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mmrag.generation import AnswerWriter
from mmrag.generation.engines import load_engine
from mmrag.generation.engines.base import StopCutter, decode_data_url, text_only
from mmrag.generation.engines.openai_http import OpenAIEngine, api_root
from mmrag.generation.errors import GenerationError
from tests.helpers import REPO, Src, free_port

QUESTION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Is the sky blue on a clear day? Answer yes or no."},
]


def test_importing_generation_loads_no_model_library_and_no_other_package() -> None:
    code = (
        "import sys, generation, generation.engines.openai_http\n"
        "heavy = {'torch', 'transformers', 'llama_cpp', 'vllm', 'sentence_transformers',"
        " 'indexes', 'retrieval', 'service', 'evaluation'}\n"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert result.stdout.strip() == "[]"


def one_line(error: pytest.ExceptionInfo[GenerationError]) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def test_unknown_engine_names_the_choices() -> None:
    with pytest.raises(GenerationError) as error:
        load_engine("ollama")
    assert "unknown engine 'ollama'" in one_line(error)
    assert "llamacpp, openai, vllm, transformers" in one_line(error)


def test_missing_gguf_file(tmp_path: Path) -> None:
    with pytest.raises(GenerationError) as error:
        load_engine("llamacpp", str(tmp_path / "absent.gguf"))
    assert "llamacpp model file not found" in one_line(error)
    assert "absent.gguf" in one_line(error) and ".gguf file" in one_line(error)


def test_a_file_that_is_not_gguf(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"not a gguf file" * 100)
    with pytest.raises(GenerationError) as error:
        load_engine("llamacpp", str(fake))
    assert "llama.cpp cannot load" in one_line(error) and "model.gguf" in one_line(error)


def test_missing_transformers_model(tmp_path: Path) -> None:
    with pytest.raises(GenerationError) as error:
        load_engine("transformers", str(tmp_path / "no-such-model"))
    message = one_line(error)
    assert "transformers engine cannot load" in message and "no-such-model" in message
    assert "pass a local directory when offline" in message


def test_in_process_engines_need_a_model_and_take_no_url() -> None:
    with pytest.raises(GenerationError, match="needs a model"):
        load_engine("transformers")
    with pytest.raises(GenerationError, match="base_url is for the openai engine"):
        load_engine("llamacpp", base_url="http://127.0.0.1:1/v1")
    with pytest.raises(GenerationError, match="needs base_url"):
        load_engine("openai")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_vllm_absent_says_what_to_install() -> None:
    with pytest.raises(GenerationError) as error:
        load_engine("vllm", "some/model")
    assert "install mmrag[gpu] on a GPU machine" in one_line(error)


def test_unreachable_endpoint() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    with pytest.raises(GenerationError) as error:
        load_engine("openai", base_url=url, timeout=5)
    message = one_line(error)
    assert f"cannot reach {url}" in message and "vllm serve" in message


def test_a_named_model_defers_the_unreachable_endpoint_to_the_first_request() -> None:
    """A service may start before its `vllm serve` is up; questions then get an error."""
    url = f"http://127.0.0.1:{free_port()}/v1"
    engine = load_engine("openai", "served-model", base_url=url, timeout=5)
    for call in (
        lambda: engine.chat(QUESTION),
        lambda: list(engine.stream(QUESTION)),
        lambda: engine.next_token_logprobs(QUESTION),
    ):
        with pytest.raises(GenerationError) as error:
            call()
        assert f"cannot reach {url}" in one_line(error)
    source = Src("s-light", "text", "Dunmore lighthouse", "Built in 1887.")
    answer = AnswerWriter(engine).write("When was it built?", [source])
    assert answer.text == "" and answer.sources == [source]
    assert f"cannot reach {url}" in answer.generation_error


def test_api_root() -> None:
    assert api_root("http://h:8000") == "http://h:8000/v1"
    assert api_root("http://h:8000/") == "http://h:8000/v1"
    assert api_root("http://h:8000/v1/") == "http://h:8000/v1"
    assert api_root("https://api.example.com/openai/v1") == "https://api.example.com/openai/v1"


def test_stop_cutter_holds_back_a_possible_stop_string() -> None:
    cutter = StopCutter(["\nEND"])
    assert cutter.feed("one two") == "one two"
    assert cutter.feed(" three\n") == " three"  # "\n" may start "\nEND"
    assert cutter.feed("EN") == ""
    assert cutter.feed("D more") == "" and cutter.stopped
    assert cutter.flush() == ""


def test_text_only_joins_text_parts_and_drops_images() -> None:
    parts = [
        {"type": "text", "text": "a "},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "b"},
    ]
    assert text_only([{"role": "user", "content": parts}]) == [{"role": "user", "content": "a b"}]


def test_only_data_urls_reach_in_process_engines() -> None:
    assert decode_data_url("data:image/png;base64,aGk=") == b"hi"
    with pytest.raises(GenerationError, match="data URLs"):
        decode_data_url("https://example.org/cat.jpg")


# --- the openai engine against llama.cpp's server ---


@pytest.fixture(scope="module")
def served(llama_server: str) -> OpenAIEngine:
    engine = load_engine("openai", base_url=llama_server)
    assert isinstance(engine, OpenAIEngine)
    return engine


def test_served_model_is_discovered(served: OpenAIEngine) -> None:
    assert served.info.name == "openai"
    assert served.info.model.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    assert served.info.accepts_images is False


def test_served_chat_and_stream_agree(served: OpenAIEngine) -> None:
    text = served.chat(QUESTION, max_tokens=16)
    deltas = list(served.stream(QUESTION, max_tokens=16))
    assert text.strip() and len(deltas) > 1
    assert "".join(deltas) == text  # greedy decoding: the same tokens either way


def test_served_stop_strings(served: OpenAIEngine) -> None:
    sea = [{"role": "user", "content": "Write two sentences about the sea."}]
    full = served.chat(sea, max_tokens=24)
    stop = full[len(full) // 2 :][:4]
    assert len(full) > 20 and stop
    assert served.chat(sea, max_tokens=24, stop=[stop]) == full[: full.index(stop)]


def test_part_lists_are_sent_as_strings_to_text_only_models(served: OpenAIEngine) -> None:
    """llama.cpp's server fails on part lists for text-only templates; the client flattens."""
    parts = [
        {"role": m["role"], "content": [{"type": "text", "text": m["content"]}]} for m in QUESTION
    ]
    assert served.chat(parts, max_tokens=16) == served.chat(QUESTION, max_tokens=16)


def test_served_logprobs_match_the_in_process_engine(served: OpenAIEngine, smollm2) -> None:
    remote = served.next_token_logprobs(QUESTION, top_k=20)
    local = smollm2.next_token_logprobs(QUESTION, top_k=20)
    assert 5 <= len(remote) <= 20
    assert all(lp <= 0 for lp in remote.values())
    assert sum(math.exp(lp) for lp in remote.values()) <= 1.0 + 1e-6
    # Same GGUF, same chat template: the same leading token with (nearly) the same logprob.
    top = max(remote, key=remote.get)
    assert top == max(local, key=local.get)
    assert remote[top] == pytest.approx(local[top], abs=0.05)


def test_served_errors_are_one_line(served: OpenAIEngine, llama_server: str) -> None:
    broken = OpenAIEngine("no-such-model", base_url=llama_server)
    too_long = [{"role": "user", "content": "word " * 5000}]  # beyond the server's n_ctx 2048
    with pytest.raises(GenerationError) as error:
        broken.chat(too_long, max_tokens=4)
    assert "answered HTTP" in one_line(error)


def test_a_llama_cpp_server_decodes_within_the_citation_grammar(served: OpenAIEngine) -> None:
    """The grammar travels in the request's `grammar` field, which llama.cpp's server obeys:
    asked for a story, the model still writes one sentence ending in a marker."""
    from mmrag.generation.citations import CitationFormat

    story = [{"role": "user", "content": "Tell me a long story about the sea, in three parts."}]
    form = CitationFormat(2)
    text = "".join(served.stream(story, max_tokens=64, constraint=form))
    assert re.fullmatch(form.regex(), text), text
    assert served.guided  # the server took it


def test_a_server_that_refuses_guided_decoding_is_asked_again_without() -> None:
    """vLLM cannot run here, and llama.cpp's server ignores the fields it does not know; a
    loopback server that answers 400 to any request carrying them stands for a server that
    refuses them (an older vLLM, a hosted API). The answer still comes, once asked plainly,
    and later requests go plain from the start."""
    from mmrag.generation.citations import CitationFormat
    from tests.openai_recorder import recording_server

    guided_fields = {"grammar", "structured_outputs", "guided_regex"}
    with recording_server(lambda _body: "The door is red [1].", refuse=guided_fields) as server:
        engine = OpenAIEngine("m", base_url=server.url)
        first = "".join(engine.stream(QUESTION, constraint=CitationFormat(1)))
        second = "".join(engine.stream(QUESTION, constraint=CitationFormat(1)))
        sent = server.chat_requests()
    assert first.strip() == second.strip() == "The door is red [1]."
    assert engine.guided is False
    assert [bool(guided_fields & set(body)) for body in sent] == [True, False, False]


def test_the_openai_engine_reads_the_servers_token_counts_even_when_stopped_early() -> None:
    """Issue 30, finding 5. The engine asks for `stream_options` (`include_usage`, and vLLM's
    and SGLang's `continuous_usage_stats`, since a caller with its sentence closes the stream
    before the last chunk). vLLM cannot run here: the loopback server reports counts as vLLM
    does (a word a token, a 100-token prompt)."""
    from mmrag.generation.types import Usage
    from tests.openai_recorder import PROMPT_TOKENS, recording_server

    with recording_server(lambda _body: "The door is red [1].") as server:
        engine = OpenAIEngine("m", base_url=server.url)
        whole = Usage()
        assert "".join(engine.stream(QUESTION, usage=whole)).strip() == "The door is red [1]."
        early = Usage()
        deltas = engine.stream(QUESTION, usage=early)
        next(deltas), next(deltas)
        deltas.close()
        [sent, _] = server.chat_requests()
    assert sent["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert (whole.prompt_tokens, whole.completion_tokens) == (PROMPT_TOKENS, 5)
    assert (early.prompt_tokens, early.completion_tokens) == (PROMPT_TOKENS, 2)


def test_a_server_that_sends_no_counts_has_its_content_chunks_counted(served: OpenAIEngine) -> None:
    """llama-cpp-python's server ignores `stream_options`: each content chunk is one token
    there, so the chunks count the completion; the prompt is not known."""
    from mmrag.generation.types import Usage

    counted = Usage()
    pieces = list(served.stream(QUESTION, max_tokens=12, usage=counted))
    assert counted.completion_tokens == len(pieces) and 0 < len(pieces) <= 12
    assert counted.prompt_tokens == 0


def test_a_server_that_refuses_stream_options_is_asked_plainly() -> None:
    from mmrag.generation.types import Usage
    from tests.openai_recorder import recording_server

    with recording_server(
        lambda _body: "The door is red [1].", refuse={"stream_options"}
    ) as server:
        engine = OpenAIEngine("m", base_url=server.url)
        counted = Usage()
        assert "".join(engine.stream(QUESTION, usage=counted)).strip() == "The door is red [1]."
        "".join(engine.stream(QUESTION))
        sent = server.chat_requests()
    assert engine.stream_usage is False
    assert ["stream_options" in body for body in sent] == [True, False, False]
    assert (counted.prompt_tokens, counted.completion_tokens) == (0, 5)  # the chunks, counted
