"""Users' JSON is parsed with a nesting limit, and every file past it fails in one line.

A 200 KB WebQA corpus of `[` made `index build` print a 31-line traceback and `eval run webqa`
grow to 23 GB. The commands here run in subprocesses capped at 3 GB of address space, so a
regression fails the test instead of exhausting the machine; in-process tests give deep input
only to `json.loads` paths, which never grew memory (they raised RecursionError).
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import time
from pathlib import Path

import pytest

from mmrag.evaluation.errors import DatasetError, EvaluationError
from mmrag.evaluation.loaders import aokvqa, stvqa, vlqa, webqa
from mmrag.evaluation.runs.checkpoint import Checkpoint, partial_path
from mmrag.indexes.corpus import read_corpus
from mmrag.indexes.corpus.limits import MAX_DEPTH, DepthGuard, JSONLimitError, loads
from mmrag.indexes.errors import CorpusError
from tests.helpers import MMRAG, REPO, assert_one_line_error

DEEP = f"nested deeper than {MAX_DEPTH} levels"
# The reported files: 200 KB of `[`, and of `{"a":` (the same depth in objects).
NESTINGS = {"arrays": "[" * 200_000, "objects": '{"a":' * 40_000}


def cap_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 * 1024**3, 3 * 1024**3))


def run_capped(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`mmrag ARGS` as `run_mmrag` runs it, in at most 3 GB of address space."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [*MMRAG, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
        preexec_fn=cap_address_space,
    )


def peak_of_capped(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """`run_capped`, and the most memory its process held resident, in bytes: its VmHWM,
    read while it runs. Not `wait4`'s ru_maxrss: Linux carries the forking process's high-water
    mark across fork and exec into it, so inside a long test session (pytest resident at 3.4 GB)
    every child "peaked" at 3.4 GB."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out, err = cwd / "stdout.txt", cwd / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        command = [*MMRAG, *args]
        process = subprocess.Popen(
            command, stdout=stdout, stderr=stderr, cwd=cwd, env=env, preexec_fn=cap_address_space
        )
        peak = 0
        while process.poll() is None:
            peak = max(peak, resident_peak(process.pid))
            time.sleep(0.01)
    said = (out.read_text(), err.read_text())
    return subprocess.CompletedProcess(command, process.returncode, *said), peak


def resident_peak(pid: int) -> int:
    """A running process's VmHWM in bytes (0 once it has exited)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return int(found.group(1)) * 1024 if found else 0


def nested(depth: int, leaf: object = 1) -> object:
    for level in range(depth):
        leaf = [leaf] if level % 2 else {"k": leaf}
    return leaf


# --- the guard and `loads` -----------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_DEPTH, MAX_DEPTH + 1])
def test_the_limit_is_exact_in_arrays_and_objects(depth: int) -> None:
    text = json.dumps(nested(depth))
    if depth > MAX_DEPTH:
        with pytest.raises(JSONLimitError, match=DEEP):
            loads(text)
    else:
        assert loads(text) == nested(depth)


def test_brackets_in_strings_and_escapes_do_not_count_whatever_the_chunks() -> None:
    """Strings full of brackets, escaped quotes and backslashes, fed in chunks as small as one
    byte (an escape or a multi-byte character cut in two), leave the depth exact."""
    tricky = ['[[{{"', '\\"[', "\\\\", '\\\\"]]', "é{💥[", ""]
    legal = nested(MAX_DEPTH - 2, {text: [text] for text in tricky})  # MAX_DEPTH levels
    for value, too_deep in ((legal, False), ([legal], True)):
        for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
            data = text.encode()
            for size in (1, 2, 3, 7, 64 * 1024):
                guard = DepthGuard()
                feed = (data[start : start + size] for start in range(0, len(data), size))
                if too_deep:
                    with pytest.raises(JSONLimitError, match=DEEP):
                        list(map(guard.feed, feed))
                else:
                    list(map(guard.feed, feed))
                    assert guard.depth == 0
            if not too_deep:
                assert loads(text) == value


def test_integers_too_long_to_convert_are_a_limit_not_a_traceback() -> None:
    with pytest.raises(JSONLimitError, match="an integer of 5000 digits"):
        loads('{"id": -' + "9" * 5000 + "}")
    assert loads('{"id": 123, "score": 0.5}') == {"id": 123, "score": 0.5}


# --- corpora -------------------------------------------------------------------------------


def test_nested_but_legal_webqa_corpus_still_loads(tiny_webqa) -> None:
    """Extra fields nesting to MAX_DEPTH inside a record are read past, not refused."""
    corpus = json.loads(tiny_webqa["json"].read_text())
    corpus["q1"]["extra"] = nested(MAX_DEPTH - 2)  # the record and the file add two levels
    tiny_webqa["json"].write_text(json.dumps(corpus))
    assert len(list(read_corpus([tiny_webqa["json"]]))) == 5


@pytest.mark.parametrize("nesting", NESTINGS)
def test_deep_jsonl_corpus_line_is_named(tmp_path: Path, nesting: str) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text('{"id": "a", "text": "fine"}\n' + NESTINGS[nesting] + "\n")
    with pytest.raises(CorpusError, match=rf"mine\.jsonl:2: JSON {DEEP}"):
        list(read_corpus([path]))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"id": ' + b"9" * 5000 + b"}\n", r"mine\.jsonl:1: an integer of 5000 digits"),
        (b'{"id": "a"}\n{"id": "\xff"}\n', r"mine\.jsonl:2: not UTF-8 text \(byte 8 in the line\)"),
    ],
)
def test_jsonl_corpus_numbers_and_bytes_are_one_error(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_bytes(content)
    with pytest.raises(CorpusError, match=message):
        list(read_corpus([path]))


@pytest.mark.parametrize(
    ("suffix", "message"),
    [(".jsonl", "big.jsonl:1: a line longer than 16,777,216 bytes"), (".json", "malformed JSON")],
)
def test_a_1_gb_sparse_corpus_fails_in_one_line_without_being_held(
    tmp_path: Path, suffix: str, message: str
) -> None:
    """A 1 GB file of zeros (sparse: no disk used) grew `index build` to 3.45 GB, its one line
    of JSON Lines held whole three times over, before its error. The JSON Lines reader stops at
    its line limit, the WebQA reader at the first byte that is not JSON."""
    corpus = tmp_path / f"big{suffix}"
    with corpus.open("wb") as handle:
        handle.truncate(1 << 30)
    build = ["index", "build", "--corpus", str(corpus), "--out", "index", "--text-embedder"]
    result, peak = peak_of_capped(*build, "none", "--no-clip", cwd=tmp_path)
    assert_one_line_error(result, message)
    assert peak < 512 * 1024**2, peak


@pytest.mark.parametrize("nesting", NESTINGS)
def test_deep_webqa_corpus_is_one_line_for_index_build_and_eval_run(
    tmp_path: Path, nesting: str
) -> None:
    corpus = tmp_path / "WebQA_deep.json"
    corpus.write_text(NESTINGS[nesting])
    build = ["index", "build", "--corpus", str(corpus), "--out", "index"]
    result = run_capped(*build, "--text-embedder", "none", "--no-clip", cwd=tmp_path)
    assert_one_line_error(result, "WebQA_deep.json", DEEP)
    run = ["eval", "run", "webqa", "--data", str(corpus), "--index", "index", "--out", "p.json"]
    assert_one_line_error(run_capped(*run, cwd=tmp_path), "WebQA_deep.json", DEEP)


# --- evaluation files ----------------------------------------------------------------------


@pytest.mark.parametrize("nesting", NESTINGS)
@pytest.mark.parametrize(
    "load",
    [
        aokvqa.load_gold,
        aokvqa.load_predictions,
        vlqa.load_gold,
        vlqa.load_predictions,
        stvqa.load_gold,
        stvqa.load_predictions,
        webqa.load_predictions,
    ],
    ids=lambda load: f"{load.__module__.rsplit('.', 1)[1]}.{load.__name__}",
)
def test_deep_benchmark_and_prediction_files_name_the_file(
    tmp_path: Path, nesting: str, load
) -> None:
    path = tmp_path / "deep.json"
    path.write_text(NESTINGS[nesting])
    with pytest.raises(DatasetError, match=rf"^{re.escape(str(path))}: JSON {DEEP}$"):
        load(path)


def test_deep_json_lines_and_tsv_cells_name_the_line(tmp_path: Path) -> None:
    lines = tmp_path / "v.jsonl"
    lines.write_text('{"qid": 1}\n' + '{"qid": 2, "x": ' + "9" * 5000 + "}\n")
    with pytest.raises(DatasetError, match=r"v\.jsonl: line 2: an integer of 5000 digits"):
        vlqa.load_gold(lines)
    tsv = tmp_path / "baseline.tsv"
    header = "Guid\tQcate\tQ\tA\tKeywords_A\tOutput_conf\tOutput"
    tsv.write_text(f'{header}\nq1\tcolor\tq\t["red"]\tred\t"[-1]"\t{NESTINGS["arrays"]}\n')
    with pytest.raises(DatasetError, match=rf"baseline\.tsv: line 2: column Output: JSON {DEEP}"):
        webqa.load_baseline_tsv(tsv)


def test_deep_line_in_a_partial_run_file_is_one_error(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    checkpoint = Checkpoint.open(out, {"bench": "webqa"}, resume=False)
    checkpoint.append("q1", {"answer": "red"})
    checkpoint.close()
    with partial_path(out).open("a") as handle:
        handle.write(NESTINGS["objects"] + "\n")
    with pytest.raises(EvaluationError, match="line 3 is not JSON"):
        Checkpoint.open(out, {"bench": "webqa"}, resume=True)


def test_deep_files_are_one_line_for_eval_score(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(NESTINGS["objects"])
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps([{"qid": "v1", "choices": ["a", "b"], "answer": 1}]))
    for args in (
        ["--gold", str(deep), "--pred", str(gold)],
        ["--gold", str(gold), "--pred", str(deep)],
    ):
        result = run_capped("eval", "score", "vlqa", *args, cwd=tmp_path)
        assert_one_line_error(result, "deep.json", DEEP)
