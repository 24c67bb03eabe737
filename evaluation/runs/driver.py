"""One `eval run`, whatever the benchmark: the steps every run takes, in one place.

A benchmark is a `Benchmark` subclass (its spec: how to read its questions, build a runner,
write its submission, score it and report what is its own); `run` does the rest, in this
order: the options every run shares; the benchmark's own refusals; its questions (`--limit`);
their images; the settings; the checkpoint (`--resume`); the question loop here or on Ray
(`checkpoint.Answering`); the submission, written atomically; the score, read back from the
file as `eval score` reads it, when the data has gold answers; the report and the summary
line. Everything a run can refuse is refused before the first model loads.

Missing images mean one thing for every benchmark that reads images. Without an option a
missing image is an error naming it. `--skip-missing` leaves its question unanswered: no
runner sees it, the report lists it, and the submission holds what the format holds for a
question without an answer (nothing, in a file keyed by question; Toloka's CSV, which lists
every question, the empty box, which scores as an absent row). A benchmark whose runner can
answer from text alone (VLQA, from its passage) also offers `--answer-without-image`.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Generic

from mmrag.evaluation.errors import EvaluationError
from mmrag.evaluation.runs.checkpoint import (
    REPORT_TITLE,
    Answering,
    Checkpoint,
    add_run_options,
    check_outputs,
    check_run_options,
    only_run_on,
    print_warnings,
    report_path,
    sibling,
)
from mmrag.evaluation.runs.report import bar_chart, table, timing_table
from mmrag.evaluation.runs.spec import Benchmark, Item, Record, RunInfo, record_problem
from mmrag.indexes.atomic import atomic_write_text

TIMINGS = "Seconds per stage; resumed questions keep the timings of the run that answered them."


def add_parser(benches: argparse._SubParsersAction, bench: type[Benchmark[Any]]) -> None:
    parser = benches.add_parser(bench.name, help=bench.help, description=bench.description)
    bench.add_inputs(parser)
    add_run_options(parser)
    if bench.images_option is not None:
        missing = parser.add_mutually_exclusive_group()
        missing.add_argument(
            "--skip-missing",
            action="store_true",
            help="leave questions whose image is missing unanswered (the report lists them): "
            + bench.skipped_in_submission,
        )
        if bench.answers_without_image:
            missing.add_argument(
                "--answer-without-image",
                action="store_true",
                help="answer questions whose image is missing without it, from their text",
            )
    bench.add_options(parser)
    parser.set_defaults(run=partial(run, bench))


@dataclass
class Questions(Generic[Item]):
    """The questions after the image checks."""

    answer: list[Item]  # what the runners answer
    written: list[Item]  # what the submission holds, in file order
    unanswered: dict[str, Record]  # records of those --skip-missing left in the submission
    skipped: list[Path]  # the missing images of the questions left unanswered


def check_images(bench: Benchmark[Item], items: list[Item]) -> Questions[Item]:
    """Refuse missing images no option accepts; with --skip-missing, set their questions
    aside, for no runner to answer."""
    if bench.images_option is None:
        return Questions(items, items, {}, [])
    folder = bench.images_folder()
    if not folder.is_dir():
        raise EvaluationError(f"{bench.images_option} {folder}: no such folder")
    paths = {bench.key(item): bench.image_paths(item) for item in items}
    missing = {key: [path for path in found if not path.is_file()] for key, found in paths.items()}
    gone = [path for found in missing.values() for path in found]
    if not gone or getattr(bench.args, "answer_without_image", False):
        return Questions(items, items, {}, [])
    if not bench.args.skip_missing:
        other = " or --answer-without-image to answer them from text" * bench.answers_without_image
        raise EvaluationError(
            f"{gone[0]}: no such image ({len(gone)} of {sum(map(len, paths.values()))} images "
            f"missing); check {bench.images_hint or bench.images_option}, or pass "
            f"--skip-missing to leave their questions unanswered{other}"
        )
    questions: Questions[Item] = Questions([], [], {}, sorted(set(gone)))
    for item in items:
        key = bench.key(item)
        if not missing[key]:
            questions.answer.append(item)
            questions.written.append(item)
        elif (record := bench.unanswered(item, missing[key][0])) is not None:
            questions.unanswered[key] = record
            questions.written.append(item)
    if not questions.written:
        raise EvaluationError(f"no question has its image under {folder}")
    return questions


def run(bench_type: type[Benchmark[Any]], args: argparse.Namespace) -> int:
    started = time.perf_counter()
    bench = bench_type(args)
    check_run_options(args)
    with only_run_on(args.out):
        return _run(bench, args, started)


def _run(bench: Benchmark[Any], args: argparse.Namespace, started: float) -> int:
    bench.check()
    questions = check_images(bench, bench.load()[: args.limit])
    settings = bench.settings()
    checkpoint = Checkpoint.open(
        args.out,
        bench.describe(settings),
        resume=args.resume,
        problem=partial(record_problem, bench.record_fields),
    )
    label = bench.label.format(**checkpoint.run)
    todo = [item for item in questions.answer if bench.key(item) not in checkpoint.records]
    with Answering(args, settings, bench.runner_factory(settings, todo)) as answering:
        local = bench.local_runner(settings, questions.answer)
        ran = answering.run(questions.answer, bench.key, checkpoint, desc=label, local=local)
    records = {**checkpoint.records, **questions.unanswered}
    check_outputs(args)  # again: a file may have appeared there while the questions ran
    checkpoint.finish(args.out, bench.submission(questions.written, records))

    scores = None
    if bench.scorable(questions.written):
        scores = bench.score(questions.written, records)
        print_warnings(scores.warnings)
    info = RunInfo(
        out=args.out,
        run=checkpoint.run,
        items=questions.written,
        records=records,
        ran_now=ran,
        resumed=len(questions.answer) - ran,
        skipped=questions.skipped,
        seconds=time.perf_counter() - started,
        in_flight=answering.in_flight,
        answered_by=answering.describe(),
        key=bench.key,
    )
    written = write_report(bench, info, scores)
    counts = [f"{ran} answered", f"{info.resumed} resumed"]
    if bench.images_option is not None:
        counts.append(f"{len(info.skipped)} skipped for missing images")
    scored = f"not scored ({bench.no_gold})"
    if scores is not None:
        scored = ", ".join(figure.format(scores.metrics) for figure in bench.headline)
    print(
        f"{label}: {len(info.items)} {bench.noun}s ({', '.join(counts + bench.counts(info))})"
        f" in {info.seconds:.1f} s; {scored}; wrote {', '.join(map(str, [args.out, *written]))}"
    )
    return 0


def write_report(bench: Benchmark[Item], info: RunInfo[Item], scores: Any | None) -> list[Path]:
    """The charts, then `OUT.report.md` linking them: the skeleton every report shares, with
    the benchmark's own sections in it. Returns the report's path and the charts'."""
    charts = bench.charts(info, scores) if scores is not None else []
    drawn = [sibling(info.out, chart.suffix) for chart in charts]
    for chart, path in zip(charts, drawn, strict=True):
        bar_chart(
            path, chart.bars, title=chart.title, ylabel=chart.ylabel, references=chart.references
        )
    counts = bench.count_rows(info)
    sections = [
        f"{REPORT_TITLE}{bench.heading.format(**info.run)}",
        bench.comparability(info),
        "## Run",
        table(["", ""], _run_rows(bench, info)),
        f"## {bench.scores_heading}",
        _not_scored(bench, info) if scores is None else bench.scores_section(info, scores),
        *(["## Counts", table(["", "count"], counts)] if counts else []),
        *bench.sections(info, scores),
        f"## Mean time per {bench.noun}",
        TIMINGS,
        timing_table([record.get("timings") or {} for record in info.all_records()], bench.stages),
    ]
    if charts:
        links = [f"![{chart.alt}]({path.name})" for chart, path in zip(charts, drawn, strict=True)]
        sections += ["## Charts" if len(charts) > 1 else "## Chart", "\n\n".join(links)]
    if info.skipped:
        listed = [f"- `{path}`" for path in info.skipped[:20]]
        listed += [f"- ... and {len(info.skipped) - 20} more"] * (len(info.skipped) > 20)
        sections += ["## Skipped: image missing", "\n".join(listed)]
    if scores is not None and scores.warnings:
        sections += ["## Scoring notes", "\n".join(f"- {w}" for w in scores.warnings)]
    report = report_path(info.out)
    atomic_write_text(report, "\n\n".join(sections) + "\n")
    return [report, *drawn]


def _run_rows(bench: Benchmark[Any], info: RunInfo[Any]) -> list[tuple[str, Any]]:
    """The Run table: the data, the benchmark's own rows, then how many questions, how long,
    where and how many at once."""
    data = info.run["data"]
    answered = f"{info.ran_now} answered in this run, {info.resumed} resumed from the partial file"
    skipped = [("skipped (image missing)", len(info.skipped))] if bench.images_option else []
    in_flight = "1 question at a time"
    if info.in_flight > 1:
        in_flight = f"{info.in_flight} questions in flight at once (stage times include "
        in_flight += "waiting for the generator)"
    return [
        ("data", ", ".join(data) if isinstance(data, list) else data),
        *bench.run_rows(info),
        (f"{bench.noun}s", f"{len(info.items)} ({answered})"),
        *skipped,
        ("wall time", f"{info.seconds:.1f} s (this process, models loading included)"),
        ("answered by", info.answered_by),
        ("concurrency", in_flight),
    ]


def _not_scored(bench: Benchmark[Any], info: RunInfo[Any]) -> str:
    return (
        f"Not scored: `{Path(info.run['data']).name}` has {bench.no_gold}; submit the "
        f"prediction file, or score it later with `mmrag eval score {bench.name}`."
    )
