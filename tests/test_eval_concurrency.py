"""`mmrag eval run --concurrency N`: several questions in flight against a llama.cpp server,
the same submission as one at a time, and a resumable, ordered partial file.

The server is llama.cpp's own `llama-server` with `--parallel` slots when one is installed
(on PATH, or named by MMRAG_LLAMA_SERVER), so requests run side by side; otherwise
llama-cpp-python's `python -m llama_cpp.server`, which answers one request at a time (and is
started with `--interrupt_requests False`, without which it cuts a streaming answer short as
soon as another request arrives). Either way the client side, N requests in flight and the
ordered checkpoint, is the real one.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mmrag.evaluation.runs.checkpoint import Checkpoint, partial_path, run_items
from tests.helpers import (
    SAMPLE_JSON,
    assert_one_line_error,
    free_port,
    run_mmrag,
    running_process,
)
from tests.test_eval_run import complete_lines, interrupt_after, webqa_args

SLOTS = 4
QUESTIONS = 6
# llama-server's batched decoding is not bit-exact: a token computed beside other slots' tokens
# (larger matrix products, a KV cache shared by the slots) can round differently from one
# computed alone, and at temperature 0 a near tie then flips (ggml-org/llama.cpp#7052; on the
# sample, 1 answer in 6 changed). One token per micro-batch and a KV cache per slot make it a
# deterministic generator again, which is what "the same submission" needs; the slots still
# answer side by side.
BATCH_INVARIANT = ("--ubatch-size", "1", "--no-kv-unified")


def llama_server_binary() -> str | None:
    return os.environ.get("MMRAG_LLAMA_SERVER") or shutil.which("llama-server")


def llama_server_command(gguf: Path, port: int, slots: int, threads: int) -> tuple[list, str]:
    """The command of a llama.cpp OpenAI-style server on loopback, and what it is."""
    binary = llama_server_binary()
    if binary:
        command = [
            binary, "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port),
            "--parallel", str(slots), "--ctx-size", str(2048 * slots),
            "--threads", str(threads), "--threads-batch", str(threads),
            *BATCH_INVARIANT,
        ]  # fmt: skip
        return command, f"llama-server --parallel {slots}"
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
        "--n_threads", str(threads), "--n_threads_batch", str(threads),
        "--interrupt_requests", "False",
    ]  # fmt: skip
    return command, "llama_cpp.server (one request at a time)"


@pytest.fixture(scope="module")
def slotted_server(smollm2_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A llama.cpp server with SLOTS parallel slots where llama-server is installed; its /v1."""
    port = free_port()
    command, _ = llama_server_command(smollm2_gguf, port, SLOTS, threads=1)
    log = tmp_path_factory.mktemp("slotted-server") / "server.log"
    base_url = f"http://127.0.0.1:{port}/v1"
    with running_process(command, f"{base_url}/models", log):
        yield base_url


def openai_args(index: Path, out: Path, base_url: str, *extra: str) -> list[str]:
    engine = ("--engine", "openai", "--base-url", base_url)
    return webqa_args(index, out, *engine, *extra)


@pytest.fixture(scope="module")
def one_at_a_time(hybrid_index: Path, slotted_server: str, tmp_path_factory) -> bytes:
    """The submission of the first QUESTIONS val questions answered one at a time."""
    out = tmp_path_factory.mktemp("sequential") / "preds.json"
    limit = ("--limit", str(QUESTIONS))
    result = run_mmrag(*openai_args(hybrid_index, out, slotted_server, *limit))
    assert result.returncode == 0, result.stderr
    assert f"({QUESTIONS} answered, 0 resumed, 0 generation errors)" in result.stdout
    return out.read_bytes()


def val_guids() -> list[str]:
    questions = json.loads(SAMPLE_JSON.read_text())
    return [guid for guid, question in questions.items() if question["split"] == "val"]


def test_concurrent_run_writes_the_same_submission_as_one_at_a_time(
    hybrid_index: Path, slotted_server: str, one_at_a_time: bytes, tmp_path: Path
) -> None:
    out = tmp_path / "preds.json"
    extra = ("--limit", str(QUESTIONS), "--concurrency", str(SLOTS))
    result = run_mmrag(*openai_args(hybrid_index, out, slotted_server, *extra))
    assert result.returncode == 0, result.stderr
    assert f"({QUESTIONS} answered, 0 resumed, 0 generation errors)" in result.stdout
    assert out.read_bytes() == one_at_a_time
    assert list(json.loads(out.read_text())) == val_guids()[:QUESTIONS]
    assert not partial_path(out).exists()


def test_resume_after_an_interrupted_concurrent_run_gives_the_same_submission(
    hybrid_index: Path, slotted_server: str, one_at_a_time: bytes, tmp_path: Path
) -> None:
    out = tmp_path / "preds.json"
    partial = partial_path(out)
    # All val questions, so Ctrl-C (after the second answer is saved) comes mid-run.
    concurrent = ("--concurrency", str(SLOTS))
    interrupted = interrupt_after(
        openai_args(hybrid_index, out, slotted_server, *concurrent), partial, answered=2
    )
    assert interrupted.returncode == 130, interrupted.stderr
    assert "rerun with --resume" in interrupted.stderr and not out.exists()
    saved = [json.loads(line)["id"] for line in complete_lines(partial)[1:]]
    order = val_guids()
    assert len(saved) >= 2 and len(saved) < len(order)
    # Answers in flight at Ctrl-C were waited for and saved; the file is in question order.
    assert saved == sorted(saved, key=order.index)
    assert len(set(saved)) == len(saved)

    extra = ("--limit", str(QUESTIONS), "--resume", *concurrent)
    resumed = run_mmrag(*openai_args(hybrid_index, out, slotted_server, *extra))
    assert resumed.returncode == 0, resumed.stderr
    kept = len(set(saved) & set(order[:QUESTIONS]))
    assert f"({QUESTIONS - kept} answered, {kept} resumed" in resumed.stdout
    assert out.read_bytes() == one_at_a_time
    assert not partial.exists()


def test_bad_concurrency_is_a_one_line_error_before_models_load(tmp_path: Path) -> None:
    out = tmp_path / "preds.json"
    hybrid_index = tmp_path / "never-read"  # refused before the index is opened
    for value in ("0", "-3"):
        result = run_mmrag(*webqa_args(hybrid_index, out, "--concurrency", value))
        assert_one_line_error(result, f"--concurrency must be at least 1, got {value}")
    vllm = run_mmrag(*webqa_args(hybrid_index, out, "--engine", "vllm", "--concurrency", "2"))
    assert_one_line_error(vllm, "--concurrency 2", "vllm serve")
    assert not out.exists() and not partial_path(out).exists()


def test_run_items_saves_in_item_order_with_items_in_flight(tmp_path: Path) -> None:
    """Ordering only (a fake slow function, no model): later items finish first, yet the
    checkpoint lists every item in order, and no more than `concurrency` run at once."""
    items = [f"q{i}" for i in range(12)]
    running, most = 0, 0
    lock = threading.Lock()

    def work(item: str) -> dict:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02 * (3 - int(item[1:]) % 4))  # within each 4, the last finishes first
        with lock:
            running -= 1
        return {"answer": item.upper()}

    checkpoint = Checkpoint.open(tmp_path / "preds.json", {"bench": "fake"}, resume=False)
    ran = run_items(items, str, work, checkpoint, desc="fake", concurrency=4)
    assert ran == len(items) and 1 < most <= 4
    lines = [json.loads(line) for line in complete_lines(checkpoint.path)]
    assert [line["id"] for line in lines[1:]] == items
    assert [line["record"]["answer"] for line in lines[1:]] == [i.upper() for i in items]


def test_run_items_keeps_what_finished_when_an_item_fails(tmp_path: Path) -> None:
    """Ordering only: an item that fails raises once its turn comes, after the items before it
    are saved; items after it that had already finished are saved too, so a resume skips them."""
    items = [f"q{i}" for i in range(8)]

    def work(item: str) -> dict:
        if item == "q2":
            time.sleep(0.1)
            raise RuntimeError("generator down")
        return {"answer": item}

    checkpoint = Checkpoint.open(tmp_path / "preds.json", {"bench": "fake"}, resume=False)
    with pytest.raises(RuntimeError, match="generator down"):
        run_items(items, str, work, checkpoint, desc="fake", concurrency=3)
    ids = [json.loads(line)["id"] for line in complete_lines(checkpoint.path)[1:]]
    assert ids[:2] == ["q0", "q1"] and "q2" not in ids
    assert ids == sorted(ids) and len(ids) >= 3  # q3 and q4 were in flight beside q2

    resumed = Checkpoint.open(tmp_path / "preds.json", {"bench": "fake"}, resume=True)
    again = run_items(items, str, lambda item: {"answer": item}, resumed, desc="fake")
    assert again == len(items) - len(ids)
    assert sorted(resumed.records) == items
