"""What every `eval run` shares: the resumable partial file, the question loop, option checks.

`OUT.partial.jsonl` starts with a header line naming what was run (benchmark, setting, index,
split, models...), then one line per finished question, flushed as soon as it is written. A
Ctrl-C or a crash loses at most the question in flight. Resuming a partial file of a different
run would mix two systems' answers in one submission, so the header must match. The final
prediction file is written atomically and only then is the partial file removed.

Questions run in file order, so a run is deterministic given its models. Everything a run can
refuse (options, data files, a partial file of another run) is checked before any model loads.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO, TypeVar

from mmrag.evaluation.errors import EvaluationError
from mmrag.indexes.atomic import atomic_write_text
from mmrag.indexes.journal import whole_lines

FORMAT = "mmrag eval run checkpoint"
VERSION = 1


def sibling(out: Path, suffix: str) -> Path:
    """A file beside OUT that shares its stem: preds.json -> preds.report.md, preds.acc.png."""
    return out.with_name(f"{out.stem}{suffix}")


def partial_path(out: Path) -> Path:
    return sibling(out, ".partial.jsonl")


def _differences(found: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    keys = [key for key in wanted if found.get(key) != wanted[key]]
    keys += [key for key in found if key not in wanted]
    return [f"{key} {found.get(key)!r} (this run: {wanted.get(key)!r})" for key in keys]


class Checkpoint:
    """Finished questions of one run: `records` (id -> record) and an append-only file.

    The file is created on the first `append`, not when the run starts, so a run that fails
    before answering anything (a model that will not load) leaves nothing to clean up.
    """

    def __init__(self, path: Path, run: dict[str, Any], records: dict[str, dict[str, Any]]):
        self.path = path
        self.run = run
        self.records = records
        self.resumed = len(records)
        self._handle: TextIO | None = None

    @classmethod
    def open(cls, out: Path, run: dict[str, Any], *, resume: bool) -> Checkpoint:
        """Refuse a stale partial file unless `resume`, and one from a different run always."""
        path = partial_path(out)
        run = json.loads(json.dumps(run))  # as the header reads back: lists, not tuples
        if not path.exists():
            return cls(path, run, {})
        if not resume:
            raise EvaluationError(
                f"{path} exists (an interrupted run): pass --resume to continue it, "
                "or delete it to start over"
            )
        found, records = _read(path)
        if differences := _differences(found, run):
            raise EvaluationError(
                f"{path}: cannot resume, it is from a different run: {'; '.join(differences)}; "
                "rerun with the same options or delete it"
            )
        return cls(path, run, records)

    def append(self, item_id: str, record: dict[str, Any]) -> None:
        """Record one finished question; on disk before the next question starts."""
        if self._handle is None:
            new = not self.path.exists()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = self.path.open("a", encoding="utf-8")
            if new:
                header = {"format": FORMAT, "version": VERSION, "run": self.run}
                self._write(header)
        self._write({"id": item_id, "record": record})
        self.records[item_id] = record

    def _write(self, value: dict[str, Any]) -> None:
        assert self._handle is not None
        self._handle.write(json.dumps(value, ensure_ascii=False) + "\n")
        self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def finish(self, out: Path, text: str) -> None:
        """Write the final file atomically, then drop the partial file it supersedes."""
        self.close()
        atomic_write_text(out, text)
        self.path.unlink(missing_ok=True)


def _read(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The header's run description and the records; a torn last line (crash mid-write) is
    dropped and cut from the file so appends continue after the last whole record."""
    lines = [line.decode("utf-8", errors="replace") for line in whole_lines(path)]
    header = _parse(path, 1, lines[0]) if lines else None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise EvaluationError(f"{path}: not an `mmrag eval run` partial file; delete it")
    if header.get("version") != VERSION:
        raise EvaluationError(
            f"{path}: partial file version {header.get('version')!r}, this mmrag writes "
            f"{VERSION}; delete it"
        )
    records: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(lines[1:], start=2):
        entry = _parse(path, number, line)
        if not isinstance(entry, dict) or "id" not in entry or "record" not in entry:
            raise EvaluationError(f"{path}: line {number} is not a finished question; delete it")
        records[str(entry["id"])] = entry["record"]
    return dict(header.get("run") or {}), records


def _parse(path: Path, number: int, line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        raise EvaluationError(f"{path}: line {number} is not JSON; delete the file") from None


T = TypeVar("T")


def progress_bar(total: int, initial: int, desc: str) -> Any:
    """tqdm on stderr, off when stderr is not a terminal (logs and CI stay clean)."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        desc=desc,
        unit="q",
        file=sys.stderr,
        disable=not sys.stderr.isatty(),
        dynamic_ncols=True,
    )


def run_items(
    items: Sequence[T],
    key: Callable[[T], str],
    work: Callable[[T], dict[str, Any]],
    checkpoint: Checkpoint,
    *,
    desc: str,
) -> int:
    """Run `work` on every item the checkpoint lacks; returns how many ran in this process."""
    todo = [item for item in items if key(item) not in checkpoint.records]
    bar = progress_bar(len(items), len(items) - len(todo), desc)
    ran = 0
    try:
        for item in todo:
            checkpoint.append(key(item), work(item))
            ran += 1
            bar.update()
    except KeyboardInterrupt:
        saved = len(items) - len(todo) + ran
        if checkpoint.path.exists():
            print(
                f"mmrag: {saved} of {len(items)} questions saved in {checkpoint.path}; "
                "rerun with --resume to continue",
                file=sys.stderr,
            )
        raise
    finally:
        bar.close()
        checkpoint.close()
    return ran


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options every `eval run BENCH` takes."""
    parser.add_argument("--out", type=Path, required=True, help="prediction file to write")
    parser.add_argument("--limit", type=int, help="only the first N questions of the split")
    parser.add_argument(
        "--resume", action="store_true", help="continue from OUT.partial.jsonl of the same run"
    )


def check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise EvaluationError(f"--limit must be at least 1, got {limit}")


def check_file(option: str, path: Path | None) -> None:
    """An optional input file given on the command line must exist: said before models load."""
    if path is not None and not path.is_file():
        raise EvaluationError(f"{option} {path}: no such file")


def print_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        print(f"mmrag: warning: {warning}", file=sys.stderr)
