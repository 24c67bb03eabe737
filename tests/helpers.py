"""What the tests share besides fixtures: corpora in WebQA's release format, the CLI as a user
runs it, and real server processes (mmrag, llama.cpp) on loopback. Fixtures live in conftest."""

from __future__ import annotations

import base64
import io
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from PIL import Image, ImageColor

if TYPE_CHECKING:
    from mmrag.generation.types import Answer

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"
SAMPLE_JSON = SAMPLE / "WebQA_sample.json"
MMRAG = [sys.executable, "-m", "mmrag.service.cli"]


@dataclass(frozen=True)
class Src:
    """A source as generation receives it (`SourceLike`), written inline by a test."""

    id: str
    modality: str
    title: str
    text: str
    ocr_text: str | None = None


def answered(raw: str, sources: list[Src]) -> Answer:
    """The model's raw output as the writer hands it on: one sentence with its citations."""
    from mmrag.generation.citations import cite
    from mmrag.generation.types import Answer

    cited = cite(raw, sources)
    return Answer(cited.text, cited.text_without_markers, cited.citations, sources)


# Ray's single-machine mode: every node and driver binds 127.0.0.1.
LOOPBACK_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def jpeg_bytes(color: str, size: tuple[int, int] = (32, 24)) -> bytes:
    """A photo-like JPEG (colour plus noise), so its bytes are mostly scan data as in WebQA."""
    base = np.array(ImageColor.getrgb(color), dtype=np.int16)
    noise = np.random.default_rng(0).integers(-25, 26, (size[1], size[0], 3))
    pixels = np.clip(base + noise, 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def write_imgs_tsv(folder: Path, images: dict[int, bytes]) -> Path:
    """imgs.tsv + imgs.lineidx as WebQA ships them: line for id i at lineidx[i % 10_000_000]."""
    tsv = folder / "imgs.tsv"
    rows = max(image_id % 10_000_000 for image_id in images) + 1
    offsets = [0] * rows
    with tsv.open("wb") as handle:
        # Written in reverse id order so that seeking, not file order, finds each image.
        for image_id in sorted(images, reverse=True):
            offsets[image_id % 10_000_000] = handle.tell()
            handle.write(f"{image_id}\t".encode() + base64.b64encode(images[image_id]) + b"\n")
    (folder / "imgs.lineidx").write_text("".join(f"{offset}\n" for offset in offsets))
    return tsv


def image_fact(image_id: int, title: str, caption: str) -> dict:
    return {
        "image_id": image_id,
        "title": title,
        "caption": caption,
        "url": f"https://example.org/{image_id}",
        "imgUrl": f"https://example.org/{image_id}.jpg",
    }


def text_fact(snippet_id: str, title: str, fact: str) -> dict:
    return {
        "snippet_id": snippet_id,
        "title": title,
        "fact": fact,
        "url": f"https://example.org/{snippet_id}",
    }


def run_mmrag(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """The real console entry point in a subprocess, as a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [*MMRAG, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def default_sigint() -> None:
    """For a child that must see Ctrl-C: a test runner started in the background hands SIGINT
    down ignored, and Python would then never raise KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def interruptible_mmrag(*args: str) -> Iterator[subprocess.Popen[str]]:
    """`mmrag ARGS` as a user starts it in a terminal (Ctrl-C reaches it, loopback only), its
    output piped; killed on leaving the block if it is still running."""
    process = start_on_loopback([*MMRAG, *args])
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@contextmanager
def slowed_down(
    process: subprocess.Popen, share: float = 0.1, period_s: float = 0.02
) -> Iterator[None]:
    """`process` runs at `share` of this CPU's speed inside the block, as on a much slower
    machine: it is stopped and continued in turn (SIGSTOP, SIGCONT), `period_s` a cycle."""
    done = threading.Event()

    def throttle() -> None:
        while not done.is_set() and process.poll() is None:
            process.send_signal(signal.SIGCONT)
            done.wait(period_s * share)
            process.send_signal(signal.SIGSTOP)
            done.wait(period_s * (1 - share))

    throttler = threading.Thread(target=throttle, name="slowed-down", daemon=True)
    throttler.start()
    try:
        yield
    finally:
        done.set()
        throttler.join()
        process.send_signal(signal.SIGCONT)  # a no-op once it has ended


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """The CLI's promise for bad input: non-zero exit, one line naming the problem, no traceback."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running_process(
    command: list[str],
    ready_url: str,
    log: Path,
    timeout_s: float = 60,
    env: dict[str, str] | None = None,
) -> Iterator[subprocess.Popen]:
    """A real server process, yielded once `ready_url` answers 200, stopped on exit; `env`
    adds to this process's environment."""
    import time

    import httpx

    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            preexec_fn=default_sigint,
        )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                pytest.fail(f"{command[2]} exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(ready_url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{command[2]} not up in {timeout_s:g} s: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def running_llama_server(gguf: Path, log: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    """`python -m llama_cpp.server` on a loopback port: (process, its /v1 base URL).

    One thread each for prompt and generation: llama.cpp's default spins every core on its
    barriers, and on a busy 2-core runner that turns a 0.3 s answer into 10 s.
    """
    port = free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
        "--n_threads", "1", "--n_threads_batch", "1",
    ]  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    with running_process(command, f"{base_url}/models", log) as server:
        yield server, base_url


@contextmanager
def running_mmrag_process(
    index: Path, log: Path, *flags: str
) -> Iterator[tuple[subprocess.Popen, str]]:
    """`mmrag serve` as a user starts it, on a loopback port: (process, its base URL)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [*MMRAG, "serve", "--index", str(index), "--port", str(port), *flags]
    with running_process(command, f"{base}/healthz", log) as server:
        yield server, base


@contextmanager
def running_mmrag_server(index: Path, log: Path, *flags: str) -> Iterator[str]:
    """`mmrag serve` as a user starts it, on a loopback port; yields its base URL."""
    with running_mmrag_process(index, log, *flags) as (_, base):
        yield base


def sign_jpeg(*lines: str, size: tuple[int, int] = (400, 150)) -> bytes:
    """A sign as PP-OCR meets them in photos: dark words on a light board, words well apart
    (the recogniser glues words set close together). Deterministic bytes."""
    from PIL import ImageDraw, ImageFont

    image = Image.new("RGB", size, (236, 232, 220))
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=30)
    for number, line in enumerate(lines):
        x = 20.0
        for word in line.split():
            draw.text((x, 20 + 42 * number), word, fill=(20, 20, 30), font=font)
            x += draw.textlength(word, font=font) + 18
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def text_dense_png(side: int = 1000, font_size: int = 18) -> bytes:
    """A page of words set edge to edge, a line every 1.4 font sizes, four to a row: the upload
    whose OCR ran for 37 s (a line costs about 40 ms to recognise on 2 cores)."""
    from PIL import ImageDraw, ImageFont

    image = Image.new("RGB", (side, side), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=font_size)
    words = [
        "harbor",
        "inn",
        "door",
        "red",
        "blue",
        "bus",
        "stop",
        "street",
        "sign",
        "open",
        "closed",
        "market",
    ]
    step = int(font_size * 1.4)
    for row, y in enumerate(range(4, side - font_size, step)):
        for column, x in enumerate(range(8, side - 200, side // 4)):
            line = " ".join(words[(row * 5 + column * 3 + n) % len(words)] for n in range(3))
            draw.text((x, y), line, fill="black", font=font)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def loopback_env() -> dict[str, str]:
    return {**os.environ, **LOOPBACK_ONLY, "PYTHONPATH": str(REPO)}


def run_on_loopback(command: list[str]) -> subprocess.CompletedProcess[str]:
    """A command that joins the test cluster, kept to loopback as the cluster is."""
    return subprocess.run(command, capture_output=True, text=True, env=loopback_env(), timeout=600)


def start_on_loopback(command: list[str]) -> subprocess.Popen[str]:
    """A command started as a user starts it in a terminal (Ctrl-C reaches it), loopback only,
    its output piped."""
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=loopback_env(),
        preexec_fn=default_sigint,
    )


@contextmanager
def two_node_cluster() -> Iterator[tuple[Any, Any]]:
    """A real Ray cluster of two nodes on loopback (`ray.cluster_utils.Cluster`, one CPU per
    node): the cluster, and its second node for tests that take it away."""
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as patch:
        for name, value in LOOPBACK_ONLY.items():
            patch.setenv(name, value)
        nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        try:
            worker = nodes.add_node(num_cpus=1)
            nodes.wait_for_nodes()
            yield nodes, worker
        finally:
            nodes.shutdown()


def wait_until(
    process: subprocess.Popen[str], ready: Callable[[], bool], timeout_s: float = 300
) -> None:
    """Poll `ready()` while `process` runs; fail, with its output, if it ends first."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert process.poll() is None, f"it ended first: {process.communicate()}"
        assert time.monotonic() < deadline, f"not ready within {timeout_s:g} s"
        time.sleep(0.02)


def lose_node_when(
    nodes: Any, node: Any, process: subprocess.Popen[str], ready: Callable[[], bool]
) -> tuple[str, str]:
    """Remove `node` without grace once `ready()` says `process` is under way; then wait for
    the process and return its stdout and stderr."""
    wait_until(process, ready)
    nodes.remove_node(node, allow_graceful=False)
    return process.communicate(timeout=300)
