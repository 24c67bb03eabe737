"""`index build --out` replaces only what is ours, and a killed build never loses the index.

Crashes are real: `mmrag index build` subprocesses killed with SIGKILL mid-build, and builds
that SIGKILL themselves exactly between the steps of the swap.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mmrag.indexes import atomic
from mmrag.indexes.collection import Collection, build_index
from mmrag.indexes.errors import InputError
from tests.helpers import MMRAG, REPO, assert_one_line_error, run_mmrag

# A build that SIGKILLs itself at one point of the swap: argv = corpus, out, point.
# "after-exchange": the exchange is done, the old index (now in the temp name) not yet deleted.
# "between-renames": the fallback's first rename is done (the index moved aside), not the second.
KILL_AT = """
import errno, os, signal, sys
from mmrag.indexes import atomic
from mmrag.indexes.collection import build_index

def die(*args):
    os.kill(os.getpid(), signal.SIGKILL)

if sys.argv[3] == "after-exchange":
    atomic._remove = die
else:
    def no_exchange(first, second):
        raise OSError(errno.EINVAL, "not on this filesystem")

    rename = os.rename

    def rename_then_die(source, target):
        rename(source, target)
        if ".old-" in os.fspath(target):
            die()

    atomic.exchange = no_exchange
    os.rename = rename_then_die
build_index([sys.argv[1]], sys.argv[2])
"""


def build_cli(corpus: Path, out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return run_mmrag(
        "index", "build", "--corpus", str(corpus), "--out", str(out), "--text-embedder", "none",
        "--quiet", *flags,
    )  # fmt: skip


def debris(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def manifest_of(out: Path) -> str:
    return (out / "manifest.json").read_text()


def other_corpus(folder: Path) -> Path:
    """A corpus unlike tiny_webqa's, so which index sits at a path is plain to see."""
    path = folder / "other.jsonl"
    path.write_text(json.dumps({"id": "other-1", "text": "an older index"}) + "\n")
    return path


def holds(out: Path, source_id: str) -> bool:
    return Collection(out).store.find(source_id) is not None


def test_out_that_is_not_an_index_is_refused_and_left_untouched(tiny_webqa, tmp_path: Path):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "holiday.jpg").write_bytes(b"precious")
    plain_file = tmp_path / "notes.txt"
    plain_file.write_text("keep me")
    for out in (folder, plain_file):
        result = build_cli(tiny_webqa["json"], out)
        assert_one_line_error(result, str(out), "--force")
    assert [p.name for p in folder.iterdir()] == ["holiday.jpg"]
    assert (folder / "holiday.jpg").read_bytes() == b"precious"
    assert plain_file.read_text() == "keep me"
    assert debris(folder) == [] and debris(plain_file) == []


def test_force_replaces_a_file_or_folder_and_an_index_needs_no_force(tiny_webqa, tmp_path: Path):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "holiday.jpg").write_bytes(b"x")
    plain_file = tmp_path / "notes.txt"
    plain_file.write_text("x")
    for out in (folder, plain_file):
        result = build_cli(tiny_webqa["json"], out, "--force")
        assert result.returncode == 0, result.stderr
        assert holds(out, "s-light")
    again = build_cli(other_corpus(tmp_path), folder)  # now an mmrag index: no --force needed
    assert again.returncode == 0, again.stderr
    assert holds(folder, "other-1") and not holds(folder, "s-light")
    assert debris(folder) == []


def test_an_empty_directory_is_used_and_inputs_inside_out_are_refused(tiny_webqa, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    build_index([tiny_webqa["json"]], empty)
    assert Collection(empty).store.find("s-light") is not None
    with pytest.raises(InputError, match="contains the input"):
        build_index([tiny_webqa["json"]], tmp_path, force=True)
    assert tiny_webqa["json"].is_file()


def test_a_folder_that_appears_during_the_build_is_not_replaced(tiny_webqa, tmp_path: Path):
    out = tmp_path / "idx"

    def someone_writes_there(sources):
        yield from sources
        out.mkdir()
        (out / "theirs.txt").write_text("mine")

    with pytest.raises(InputError, match="refusing to replace"):
        build_index([tiny_webqa["json"]], out, progress=someone_writes_there)
    assert (out / "theirs.txt").read_text() == "mine"
    assert debris(out) == []


def write_big_corpus(path: Path, n: int = 20_000) -> Path:
    """About a second of indexing: long enough to be killed in the middle."""
    with path.open("w") as handle:
        for i in range(n):
            words = " ".join(f"w{(i * 7 + j * 13) % 5000}" for j in range(40))
            handle.write(json.dumps({"id": f"s{i}", "text": words}) + "\n")
    return path


def test_kill_9_mid_build_keeps_the_index_and_the_next_build_cleans_up(tiny_webqa, tmp_path):
    out = tmp_path / "idx"
    build_index([tiny_webqa["json"]], out)
    before = manifest_of(out)
    big = write_big_corpus(tmp_path / "big.jsonl")
    command = [*MMRAG, "index", "build", "--corpus", str(big), "--out", str(out)]
    command += ["--text-embedder", "none", "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    build = subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not any(tmp_path.glob(f".idx.{build.pid}-*.tmp/sources/sources.jsonl")):
        assert build.poll() is None, build.stderr.read()
        assert time.monotonic() < deadline, "the build never started writing"
        time.sleep(0.005)
    build.send_signal(signal.SIGKILL)
    assert build.wait() == -signal.SIGKILL
    assert manifest_of(out) == before
    assert holds(out, "s-light")
    (stale,) = debris(out)
    assert stale.startswith(f".idx.{build.pid}-") and stale.endswith(".tmp")

    build_index([tiny_webqa["json"]], out)
    assert debris(out) == []
    assert holds(out, "s-light")


def kill_at(point: str, corpus: Path, out: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", KILL_AT, str(corpus), str(out), point]
    process = subprocess.run(command, cwd=REPO, env=env, capture_output=True, timeout=120)
    assert process.returncode == -signal.SIGKILL, process.stderr.decode()


def test_killed_right_after_the_exchange_the_new_index_is_in_place(tiny_webqa, tmp_path: Path):
    out = tmp_path / "idx"
    build_index([other_corpus(tmp_path)], out)
    before = manifest_of(out)
    kill_at("after-exchange", tiny_webqa["json"], out)
    assert holds(out, "s-light")  # the new index, whole
    (stale,) = debris(out)
    assert (out.parent / stale / "manifest.json").read_text() == before
    build_index([tiny_webqa["json"]], out)
    assert debris(out) == []


def test_killed_between_the_two_renames_the_previous_index_comes_back(tiny_webqa, tmp_path: Path):
    out = tmp_path / "idx"
    build_index([other_corpus(tmp_path)], out)
    before = manifest_of(out)
    kill_at("between-renames", tiny_webqa["json"], out)
    assert not out.exists()  # the window the exchange closes, forced open here
    stats = run_mmrag("index", "stats", "--index", str(out))
    assert stats.returncode == 0, stats.stderr
    assert "restored from .idx.old-" in stats.stderr
    assert manifest_of(out) == before
    assert len(debris(out)) == 1  # the killed build's finished temp, cleaned by the next build
    build_index([tiny_webqa["json"]], out)
    assert debris(out) == []
    assert holds(out, "s-light")


def test_without_exchange_two_renames_still_replace_the_index(tiny_webqa, tmp_path, monkeypatch):
    def no_exchange(first: Path, second: Path) -> None:
        raise OSError(22, "not on this filesystem")

    monkeypatch.setattr(atomic, "exchange", no_exchange)
    out = tmp_path / "idx"
    build_index([other_corpus(tmp_path)], out)
    build_index([tiny_webqa["json"]], out)
    assert holds(out, "s-light") and not holds(out, "other-1")
    assert debris(out) == []


def test_cleanup_removes_only_debris_of_dead_builds(tmp_path: Path):
    out = tmp_path / "idx"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    names = {
        f".idx.{dead}-abc_12.tmp": False,  # a killed build's temp: removed
        f".idx.old-{dead}-0a1b2c3d": False,  # a killed build's previous index: removed
        f".idx.{os.getpid()}-live9.tmp": True,  # a live build's: kept
        ".idx.backup.tmp": True,  # not our pattern
        f".idx.{dead}.tmp": True,
        f".other.{dead}-abc.tmp": True,  # another index's name
        f"idx.{dead}-abc.tmp": True,
    }
    for name in names:
        (tmp_path / name).mkdir()
    atomic.clean_stale(out)
    assert {p.name for p in tmp_path.iterdir()} == {
        "idx",
        *(n for n, kept in names.items() if kept),
    }


def test_an_index_is_readable_as_any_file_made_by_its_builder(tiny_webqa, tmp_path: Path):
    """mkstemp and mkdtemp make private files: an index built by root in an image must still
    be readable by the service's own user."""
    from mmrag.indexes.atomic import UMASK

    out = tmp_path / "idx"
    build_index([tiny_webqa["json"]], out)
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~UMASK
    assert stat.S_IMODE((out / "manifest.json").stat().st_mode) == 0o666 & ~UMASK
