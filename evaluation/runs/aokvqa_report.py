"""The A-OKVQA run report: `OUT.report.md` and `OUT.accuracy.png` (MC and DA beside GPV-2).

The published numbers are for the whole val or test split; a `--limit`ed run, a run with
skipped images or on a small fixture is not comparable, and the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmrag.evaluation.loaders.aokvqa import AOKVQAItem
from mmrag.evaluation.runs import markdown as md
from mmrag.evaluation.runs.baselines import aokvqa_baselines
from mmrag.evaluation.runs.charts import Bar, Reference, bar_chart
from mmrag.evaluation.runs.checkpoint import sibling
from mmrag.indexes.atomic import atomic_write_text

LABELS = {"mc": "MC accuracy", "da": "DA accuracy", "bleu": "rationale BLEU", "meteor": "METEOR"}


@dataclass
class AOKVQARunInfo:
    out: Path
    run: dict[str, Any]
    items: list[AOKVQAItem]  # the items answered (skipped ones excluded)
    records: dict[str, dict[str, Any]]
    ran_now: int
    resumed: int
    skipped: list[Path]  # images missing under --skip-missing
    seconds: float


def _fmt(metric: str, value: float | None) -> str:
    """MC/DA/BLEU are 0..100 as published, METEOR 0..1."""
    return md.number(value, 3 if metric == "meteor" else 2)


def _run_table(info: AOKVQARunInfo) -> str:
    run = info.run
    engine = run["engine"] + (f" ({run['model']})" if run.get("model") else " (embedded model)")
    knowledge = (
        f"{run['knowledge']} sources per question from {run['index']}"
        if run.get("index")
        else "none"
    )
    rows = [
        ("data", run["data"]),
        ("split / images", f"{run['split']} / {run['coco_dir']}/{run['split']}2017"),
        ("captions", run.get("captions") or "none (engines without vision see no image)"),
        ("knowledge", knowledge),
        ("generator", f"{engine}, temperature 0"),
        ("multiple choice", f"by {run['choose']}"),
        (
            "questions",
            f"{len(info.items)} ({info.ran_now} answered in this run, {info.resumed} resumed)",
        ),
        ("skipped (image missing)", len(info.skipped)),
        ("wall time", f"{info.seconds:.1f} s (this process, models loading included)"),
    ]
    return md.table(["", ""], rows)


def _scores(info: AOKVQARunInfo, metrics: dict[str, float | None] | None) -> str:
    if metrics is None:
        return (
            f"Not scored: split {info.run['split']} has no answers in its release file; "
            "submit the prediction file to the A-OKVQA leaderboard."
        )
    published = aokvqa_baselines(info.run["split"])
    rows = []
    for metric, label in LABELS.items():
        reference = "; ".join(f"{b.system} {b.value:g}" for b in published if b.metric == metric)
        rows.append([label, _fmt(metric, metrics.get(metric)), reference or "-"])
    table = md.table(["metric", "ours", f"published ({info.run['split']} split)"], rows)
    return (
        "MC and DA as the official script scores them (x100; DA leaves out questions marked "
        "`difficult_direct_answer`); rationales by SacreBLEU and METEOR against the three "
        "references (`evaluation.scoring.aokvqa`, the code `mmrag eval score aokvqa` uses).\n\n"
        + table
    )


def _counts(info: AOKVQARunInfo) -> str:
    difficult = sum(item.difficult_direct_answer for item in info.items)
    fallbacks = sum(bool(info.records[i.question_id].get("choice_fallback")) for i in info.items)
    rows = [
        ("questions scored for MC", len(info.items)),
        ("questions scored for DA (not difficult)", len(info.items) - difficult),
        ("MC answers where the chooser had no preference (first choice given)", fallbacks),
    ]
    return md.table(["", "count"], rows)


def _timings(info: AOKVQARunInfo) -> str:
    return md.timing_table([info.records[i.question_id].get("timings") or {} for i in info.items])


def write_chart(info: AOKVQARunInfo, metrics: dict[str, float | None]) -> Path:
    path = sibling(info.out, ".accuracy.png")
    split = info.run["split"]
    bars = [Bar("MC", metrics.get("mc")), Bar("DA", metrics.get("da"))]
    references = [
        Reference(b.value, f"published {metric.upper()}: {b.label}", "published", (index, index))
        for index, metric in enumerate(("mc", "da"))
        for b in aokvqa_baselines(split)
        if b.metric == metric and b.system == "GPV-2"
    ]
    bar_chart(
        path,
        bars,
        title=f"A-OKVQA accuracy: mmrag, {split} ({len(info.items)} questions)\n"
        "published GPV-2 (dashed) is on the whole split: orientation only",
        ylabel="accuracy (%)",
        references=references,
    )
    return path


def _comparability(info: AOKVQARunInfo) -> str:
    return (
        f"> **Not comparable with the published numbers** unless this run covers the whole "
        f"A-OKVQA {info.run['split']} split: it answered {len(info.items)} questions of "
        f"`{Path(info.run['data']).name}`"
        + (f", skipping {len(info.skipped)} whose image was missing" if info.skipped else "")
        + ". Baselines are shown for orientation only, labelled with their split."
    )


def write_aokvqa_report(
    info: AOKVQARunInfo, metrics: dict[str, float | None] | None, warnings: list[str]
) -> Path:
    sections = [
        f"# mmrag eval run aokvqa: split {info.run['split']}",
        _comparability(info),
        "## Run",
        _run_table(info),
        "## Scores",
        _scores(info, metrics),
        "## Counts",
        _counts(info),
        "## Mean time per question",
        _timings(info),
    ]
    if metrics is not None:
        chart = write_chart(info, metrics)
        sections += ["## Chart", f"![MC and DA accuracy]({chart.name})"]
    if info.skipped:
        listed = "\n".join(f"- `{path}`" for path in info.skipped[:20])
        more = f"\n- ... and {len(info.skipped) - 20} more" if len(info.skipped) > 20 else ""
        sections += ["## Skipped: image missing", listed + more]
    if warnings:
        sections += ["## Scoring notes", "\n".join(f"- {w}" for w in warnings)]
    report = sibling(info.out, ".report.md")
    atomic_write_text(report, "\n\n".join(sections) + "\n")
    return report
