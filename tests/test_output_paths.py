"""Every output path is checked before work starts, by one helper (indexes/outputs.py).

Issue 30, finding 3: `mmrag eval run webqa --data gold.json --out gold.json` exited 0 after
replacing the 514 KB dataset with 400 bytes of predictions, `--out` onto any file mmrag had not
written was overwritten silently, and `--out` an empty directory answered every question before
failing on the rename. Each is refused now in one line, before any model loads, the file as it
was; `index build --out` goes through the same check.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mmrag.evaluation.runs.checkpoint import REPORT_TITLE, check_outputs
from mmrag.indexes.errors import InputError
from mmrag.indexes.outputs import Output, check_output_path
from tests.helpers import assert_one_line_error, run_mmrag


def dataset(path: Path) -> bytes:
    """A WebQA-shaped dataset of some size, written for the test; its bytes."""
    records = {
        f"q{n}": {"Q": f"What color is door {n}?", "A": [f"Door {n} is blue."], "split": "val"}
        for n in range(300)
    }
    data = json.dumps(records).encode()
    path.write_bytes(data)
    return data


def eval_run(tmp_path: Path, data: Path, out: Path, *flags: str):
    index = tmp_path / "no-index"  # never opened: the output is refused first
    return run_mmrag(
        "eval", "run", "webqa", "--data", str(data), "--index", str(index), "--out", str(out),
        *flags,
    )  # fmt: skip


def test_an_eval_run_refuses_to_write_over_its_own_data(tmp_path: Path) -> None:
    gold = tmp_path / "gold.json"
    before = dataset(gold)
    result = eval_run(tmp_path, gold, gold)
    assert_one_line_error(result, f"--out {gold} is the input --data {gold}")
    assert gold.read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["gold.json"]  # nothing began
    # Not with --force either, nor under another name for the same file.
    linked = tmp_path / "linked.json"
    os.link(gold, linked)
    assert_one_line_error(eval_run(tmp_path, gold, linked, "--force"), "is the input --data")
    assert gold.read_bytes() == before


def test_an_eval_run_refuses_files_it_did_not_write_and_directories(tmp_path: Path) -> None:
    gold = tmp_path / "gold.json"
    dataset(gold)
    notes = tmp_path / "notes.json"
    notes.write_bytes(b'{"mine": true}')
    assert_one_line_error(
        eval_run(tmp_path, gold, notes),
        f"--out {notes} is a file, not a prediction file",
        "--force",
    )
    assert notes.read_bytes() == b'{"mine": true}'
    folder = tmp_path / "runs"
    folder.mkdir()
    assert_one_line_error(eval_run(tmp_path, gold, folder), f"--out {folder} is a directory")
    assert list(folder.iterdir()) == []
    # A report of someone else's beside the output is not replaced either.
    (tmp_path / "preds.report.md").write_text("# my notes\n")
    result = eval_run(tmp_path, gold, tmp_path / "preds.json")
    assert_one_line_error(result, "--out's report", "preds.report.md", "not a report")
    assert (tmp_path / "preds.report.md").read_text() == "# my notes\n"


def test_what_an_earlier_run_wrote_may_be_replaced_and_force_replaces_a_stranger(
    tmp_path: Path,
) -> None:
    """An earlier run's prediction file is known by the report a run writes beside it."""
    from argparse import Namespace

    data = tmp_path / "gold.json"
    dataset(data)
    out = tmp_path / "preds.json"
    out.write_text("{}")
    args = Namespace(out=out, data=data, images=None, force=False, limit=None)
    with pytest.raises(InputError, match="is a file, not a prediction file"):
        check_outputs(args)
    out.with_name("preds.report.md").write_text(f"{REPORT_TITLE}webqa val\n")
    check_outputs(args)  # an earlier run's: replaced without --force
    out.with_name("preds.report.md").unlink()
    check_outputs(Namespace(**{**vars(args), "force": True}))


def test_one_check_for_directories_and_files(tmp_path: Path) -> None:
    folder = Output("an mmrag index", directory=True, ours=lambda path: False)
    single = Output("a prediction file", directory=False, ours=lambda path: False)
    corpus = tmp_path / "data" / "corpus.jsonl"
    corpus.parent.mkdir()
    corpus.write_text("{}\n")
    with pytest.raises(InputError, match="contains the input --corpus"):
        check_output_path(tmp_path / "data", folder, [("--corpus", corpus)], force=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    check_output_path(empty, folder, [])  # an empty directory may become an index
    with pytest.raises(InputError, match="is a directory; name the file"):
        check_output_path(empty, single, [], force=True)
    check_output_path(tmp_path / "new.json", single, [("--data", corpus)])
