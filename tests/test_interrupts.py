"""Ctrl-C mid-answer, on a CPU slowed ten times: the documented exit code, never an abort.

A process that finalises while llama.cpp runs in one of its threads is aborted by the C++
runtime ("terminate called without an active exception"), so how long a worker takes to stop
must not matter. (`eval run` is interrupted the same way in test_eval_run.py, `index build`
during OCR in test_ocr.py.)
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx

from tests.helpers import (
    MMRAG,
    free_port,
    interruptible_mmrag,
    running_process,
    slowed_down,
)

QUESTION = "How many arches does the Alder Bridge have?"


def assert_stopped_cleanly(returncode: int, stderr: str, documented: int) -> None:
    assert returncode == documented, stderr  # an abort would be -6
    assert "terminate called" not in stderr and "Traceback" not in stderr, stderr


def test_ctrl_c_during_a_streamed_answer_exits_130(hybrid_index: Path):
    with interruptible_mmrag("ask", QUESTION, "--index", str(hybrid_index), "--stream") as process:
        first = process.stdout.read(1)  # the first token is out: llama.cpp is generating
        assert first, process.communicate()
        with slowed_down(process):
            process.send_signal(signal.SIGINT)
            _, stderr = process.communicate(timeout=120)
    assert_stopped_cleanly(process.returncode, stderr, documented=130)
    assert stderr.strip().splitlines() == ["mmrag: interrupted"]


def test_ctrl_c_stops_the_service_mid_answer(hybrid_index: Path, tmp_path: Path):
    """Ctrl-C is how a server is stopped: the answer in flight is closed and the exit is 0."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    command = [*MMRAG, "serve", "--index", str(hybrid_index), "--port", str(port)]
    generating = threading.Event()

    def stream() -> None:
        body = {"question": QUESTION, "stream": True}
        try:
            with httpx.stream("POST", f"{base}/v1/answer", json=body, timeout=120) as response:
                for line in response.iter_lines():
                    if line == "event: token":
                        generating.set()
        except httpx.HTTPError:
            pass  # the server went away mid-stream, as it should

    with running_process(command, f"{base}/healthz", log) as process:
        client = threading.Thread(target=stream, daemon=True)
        client.start()
        assert generating.wait(60), log.read_text()[-2000:]
        with slowed_down(process):
            time.sleep(0.2)
            process.send_signal(signal.SIGINT)
            returncode = process.wait(timeout=120)
        client.join(30)
    log_text = log.read_text()
    assert_stopped_cleanly(returncode, log_text, documented=0)
    assert "Finished server process" in log_text
