"""What every `eval run` shares: the resumable partial file, the question loop, option checks.

`OUT.partial.jsonl` starts with a header line naming what was run (benchmark, setting, index,
split, models...), then one line per finished question, flushed as soon as it is written. A
Ctrl-C or a crash loses at most the question in flight. Resuming a partial file of a different
run would mix two systems' answers in one submission, so the header must match. The final
prediction file is written atomically and only then is the partial file removed.

Questions run in file order, so a run is deterministic given its models. With `--concurrency N`
(`run_items`), N questions are in flight at once on worker threads, so an OpenAI-compatible
server batches them; answers may finish out of order but are appended in question order, so
with a deterministic generator the submission is that of a one-at-a-time run. A Ctrl-C then
waits for the answers in flight and saves every finished one (still in question order, with
gaps where an earlier one never ran). `Answering` runs that loop with the run's own runner,
here or on a Ray cluster (`cluster.ClusterWork`). Everything a run can refuse (options, data
files, a partial file of another run) is checked before any model loads.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from mmrag.evaluation.errors import EvaluationError
from mmrag.evaluation.runs.cluster import (
    CPUS_PER_WORKER,
    ClusterWork,
    Work,
    WorkFactory,
    add_cluster_options,
    check_cluster_options,
)
from mmrag.indexes.atomic import atomic_write_text
from mmrag.indexes.corpus.limits import JSONLimitError, loads
from mmrag.indexes.journal import whole_lines
from mmrag.indexes.outputs import Output, check_output_path

if TYPE_CHECKING:
    from mmrag.core.settings import Settings

FORMAT = "mmrag eval run checkpoint"
VERSION = 1


def sibling(out: Path, suffix: str) -> Path:
    """A file beside OUT that shares its stem: preds.json -> preds.report.md, preds.acc.png."""
    return out.with_name(f"{out.stem}{suffix}")


def partial_path(out: Path) -> Path:
    return sibling(out, ".partial.jsonl")


def report_path(out: Path) -> Path:
    return sibling(out, ".report.md")


def lock_path(out: Path) -> Path:
    return sibling(out, ".lock")


@contextlib.contextmanager
def only_run_on(out: Path) -> Iterator[None]:
    """Hold OUT.lock while the run lasts, or refuse the run: two runs on one --out appended
    to one partial file (each question twice) and one failed after answering everything. An
    advisory lock (`flock`), so a run that dies leaves no lock behind; the file goes when the
    run ends."""
    path = lock_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        handle = path.open("a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise EvaluationError(
                f"--out {out}: another `mmrag eval run` is writing it (it holds {path}); wait "
                "for it to end, or write elsewhere"
            ) from None
        try:
            if os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino:
                break  # else the run before removed the file while this one opened it
        except FileNotFoundError:
            pass
        handle.close()
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
        handle.close()


REPORT_TITLE = "# mmrag eval run "  # how every report a run writes begins


def _is_report(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(len(REPORT_TITLE)) == REPORT_TITLE.encode()
    except OSError:
        return False


# A run's own earlier outputs, which it may replace: a prediction file is known by the report
# a run writes beside it (the formats are the benchmarks' own, with no room for a mark).
SUBMISSION = Output(
    "a prediction file of an earlier `mmrag eval run` (whose OUT.report.md sits beside it)",
    directory=False,
    ours=lambda out: _is_report(report_path(out)),
)
REPORT = Output("a report of `mmrag eval run`", directory=False, ours=_is_report)


def check_outputs(args: argparse.Namespace) -> None:
    """--out and its report replace only what an earlier run wrote (or anything with --force),
    and never an input (--data, the images, --captions ...) whatever the flags."""
    inputs = []
    for name, value in vars(args).items():
        for path in value if isinstance(value, list) else [value]:
            if name != "out" and isinstance(path, Path):
                inputs.append((f"--{name.replace('_', '-')}", path))
    check_output_path(args.out, SUBMISSION, inputs, force=args.force)
    check_output_path(
        report_path(args.out), REPORT, inputs, force=args.force, option="--out's report"
    )


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
    def open(
        cls,
        out: Path,
        run: dict[str, Any],
        *,
        resume: bool,
        problem: Callable[[Any], str | None] = lambda record: None,
    ) -> Checkpoint:
        """Refuse a stale partial file unless `resume`, one from a different run always, and
        one with a line that is no finished question of this benchmark (`problem(record)`
        says what is wrong with a record) or that repeats a question."""
        path = partial_path(out)
        run = json.loads(json.dumps(run))  # as the header reads back: lists, not tuples
        if not path.exists():
            return cls(path, run, {})
        if not resume:
            raise EvaluationError(
                f"{path} exists (an interrupted run): pass --resume to continue it, "
                "or delete it to start over"
            )
        found, records = _read(path, problem)
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


def _read(
    path: Path, problem: Callable[[Any], str | None]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The header's run description and the records, each checked as it is read (a line
    another program or a run of another version wrote was a 23-line traceback on resuming, or
    went into the submission and failed its scoring after the partial file was gone); a torn
    last line (crash mid-write) is dropped and cut from the file so appends continue after the
    last whole record."""
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
    first_line: dict[str, int] = {}
    for number, line in enumerate(lines[1:], start=2):
        entry = _parse(path, number, line)
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            why = "is not a finished question (an object with a string 'id' and a 'record')"
        elif entry["id"] in first_line:
            why = f"repeats question {entry['id'][:64]!r} of line {first_line[entry['id']]}"
        elif (wrong := problem(entry.get("record"))) is not None:
            why = f"holds no answer this run can use ({wrong})"
        else:
            records[entry["id"]] = entry["record"]
            first_line[entry["id"]] = number
            continue
        raise EvaluationError(
            f"{path}: line {number} {why}; delete that line to answer its question again, or "
            "the file to start over"
        )
    return dict(header.get("run") or {}), records


def _parse(path: Path, number: int, line: str) -> Any:
    try:
        return loads(line)
    except (json.JSONDecodeError, JSONLimitError):
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
    concurrency: int = 1,
) -> int:
    """Run `work` on every item the checkpoint lacks; returns how many ran in this process.

    With `concurrency` above 1, that many items are in flight at once on worker threads (so
    `work` must be safe to call from several threads); each result is appended once it and
    every item before it have finished, so the checkpoint holds what a one-at-a-time run
    would. On Ctrl-C or a failure, items not started are dropped, those in flight are waited
    for (a second Ctrl-C stops waiting), and every finished one is saved, in item order.
    """
    todo = [item for item in items if key(item) not in checkpoint.records]
    bar = progress_bar(len(items), len(items) - len(todo), desc)
    ran = 0

    def save(item: T, record: dict[str, Any]) -> None:
        nonlocal ran
        checkpoint.append(key(item), record)
        ran += 1
        bar.update()

    try:
        if concurrency <= 1:
            for item in todo:
                save(item, work(item))
        else:
            _run_concurrently(todo, key, work, checkpoint, save, concurrency)
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


def _run_concurrently(
    todo: Sequence[T],
    key: Callable[[T], str],
    work: Callable[[T], dict[str, Any]],
    checkpoint: Checkpoint,
    save: Callable[[T, dict[str, Any]], None],
    concurrency: int,
) -> None:
    """`save` each item's result in item order while `concurrency` items run at once.

    Twice `concurrency` items are submitted ahead, so the workers stay busy while the oldest
    is slow; the pool's size caps how many run. The oldest item is saved as soon as it has
    finished, and only then leaves the queue, so an interruption cannot lose it.
    """
    pending: deque[tuple[T, Future[dict[str, Any]]]] = deque()
    upcoming = iter(todo)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="eval-run")
    try:
        while True:
            while len(pending) < 2 * concurrency and (item := next(upcoming, None)) is not None:
                pending.append((item, pool.submit(work, item)))
            if not pending:
                return
            item, future = pending[0]
            save(item, future.result())
            pending.popleft()
    except BaseException:
        for item, record in _finish_in_flight(pending):
            if key(item) not in checkpoint.records:
                save(item, record)
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _finish_in_flight(
    pending: Sequence[tuple[T, Future[dict[str, Any]]]],
) -> list[tuple[T, dict[str, Any]]]:
    """After an interruption or a failure: cancel what has not started, wait for what runs
    (Ctrl-C stops the wait), and return the items that finished well, in item order."""
    for _, future in pending:
        future.cancel()
    running = [future for _, future in pending if not future.done()]
    if running:
        print(
            f"mmrag: stopping; waiting for the {len(running)} questions in flight "
            "(Ctrl-C again to stop waiting)",
            file=sys.stderr,
        )
        with contextlib.suppress(KeyboardInterrupt):
            wait_all(running)
    return [
        (item, future.result())
        for item, future in pending
        if future.done() and not future.cancelled() and future.exception() is None
    ]


class Answering:
    """Where an eval run's questions are answered: in this process, or with `--executor ray`
    by `remote(settings)` built once on each Ray worker (`ClusterWork`), its threads those of
    the one CPU Ray gives it (threads for every core of a node would make the node's workers
    spin against each other). Enter it before models load here: a cluster that cannot take
    the run refuses it first."""

    def __init__(self, args: Any, settings: Settings, remote: Callable[[Settings], Work]) -> None:
        self.settings = settings
        self.remote = remote
        self.concurrency = args.concurrency
        self.cluster: ClusterWork[Any] | None = None
        if args.executor == "ray":
            threads = settings.torch_threads or CPUS_PER_WORKER
            on_worker = settings.model_copy(update={"torch_threads": threads})
            self.cluster = ClusterWork(
                partial(remote, on_worker),
                address=args.ray_address,
                workers=args.ray_workers,
                in_flight=args.concurrency,
                num_gpus=1.0 if (settings.device or "").startswith("cuda") else 0.0,
            )

    def __enter__(self) -> Answering:
        if self.cluster is not None:
            self.cluster.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.cluster is not None:
            self.cluster.__exit__(*exc)

    def run(
        self,
        items: Sequence[T],
        key: Callable[[T], str],
        checkpoint: Checkpoint,
        *,
        desc: str,
        local: WorkFactory | None = None,
    ) -> int:
        """`run_items` with the cluster's work, or this process's: `local()`, by default
        `remote(settings)`; `in_flight` questions at once."""
        work = self.cluster
        if work is None:
            work = local() if local is not None else self.remote(self.settings)
        return run_items(items, key, work, checkpoint, desc=desc, concurrency=self.in_flight)

    @property
    def in_flight(self) -> int:
        return self.cluster.in_flight if self.cluster is not None else self.concurrency

    def describe(self) -> str:
        return self.cluster.describe() if self.cluster is not None else "this process"


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options every `eval run BENCH` takes."""
    parser.add_argument("--out", type=Path, required=True, help="prediction file to write")
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace --out (and OUT.report.md) even if no earlier eval run wrote it; an input "
        "is never replaced",
    )
    parser.add_argument("--limit", type=int, help="only the first N questions of the split")
    parser.add_argument(
        "--resume", action="store_true", help="continue from OUT.partial.jsonl of the same run"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        metavar="N",
        help="questions in flight at once (default 1), for a server that batches them "
        "(--engine openai: vLLM, llama.cpp's llama-server --parallel N); answers are saved in "
        "question order. Gains nothing with the embedded llamacpp engine (one question at a "
        "time). llama-cpp-python's server answers one request at a time and needs "
        "--interrupt_requests False, or it cuts answers short",
    )
    add_cluster_options(parser)


def check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise EvaluationError(f"--limit must be at least 1, got {limit}")


def check_run_options(args: argparse.Namespace) -> None:
    """The options of `add_run_options` that argparse cannot refuse by itself."""
    check_outputs(args)
    check_limit(args.limit)
    check_cluster_options(args)
    if args.concurrency < 1:
        raise EvaluationError(f"--concurrency must be at least 1, got {args.concurrency}")
    if args.concurrency > 1:
        from mmrag.core.options import settings_from

        if settings_from(args).engine == "vllm":
            raise EvaluationError(
                f"--concurrency {args.concurrency} needs a server: the in-process vllm engine "
                "takes one caller at a time; run `vllm serve MODEL` and pass --engine openai "
                "--base-url URL (or leave --concurrency at 1)"
            )


def check_file(option: str, path: Path | None) -> None:
    """An optional input file given on the command line must exist: said before models load."""
    if path is not None and not path.is_file():
        raise EvaluationError(f"{option} {path}: no such file")


def print_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        print(f"mmrag: warning: {warning}", file=sys.stderr)
