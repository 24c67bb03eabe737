"""The WebQA run report: `OUT.report.md` with tables, and per-Qcate bar charts beside it.

Numbers are printed as the leaderboard does (percent, two decimals). Published baselines appear
only beside the subset and setting they were measured on, and the report says up front that a
run on other questions (the sample corpus, the val split) is not comparable with them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmrag.evaluation.runs import markdown as md
from mmrag.evaluation.runs.baselines import Published, reference_lines, webqa_baselines
from mmrag.evaluation.runs.charts import Bar, Reference, bar_chart
from mmrag.evaluation.runs.checkpoint import sibling
from mmrag.evaluation.runs.webqa_scores import WebQAScores, query_type
from mmrag.indexes.atomic import atomic_write_text
from mmrag.indexes.corpus.webqa import WebQAQuestion

METRICS = (("retrieval_f1", "retrieval F1"), ("fl", "FL"), ("acc", "Acc"), ("fl_x_acc", "FL×Acc"))
STAGES = ("retrieve_s", "rerank_s", "first_token_s", "generate_s", "total_s")
FL_MISSING = (
    "not computed: FL needs BART; pass --fl-model facebook/bart-large-cnn (or a local copy of it)"
)


@dataclass
class WebQARunInfo:
    """What was run and what came of it, apart from the scores."""

    out: Path
    run: dict[str, Any]  # the checkpoint header's run description
    questions: list[WebQAQuestion]
    records: dict[str, dict[str, Any]]
    ran_now: int
    resumed: int
    seconds: float
    index_sources: dict[str, int]  # indexed sources per modality
    images_note: str
    fl_note: str
    # What the pipeline resolved the settings to (defaults such as the fitted threshold).
    retrievers: list[str]
    fusion: str
    threshold: float

    def record(self, question: WebQAQuestion) -> dict[str, Any]:
        return self.records[question.guid]


def chart_paths(out: Path, with_fl: bool) -> dict[str, Path]:
    names = ["retrieval_f1", "acc", *(["fl_x_acc"] if with_fl else [])]
    return {name: sibling(out, f".{name}.png") for name in names}


def _comparability(info: WebQARunInfo) -> str:
    data = ", ".join(Path(path).name for path in info.run["data"])
    pool = sum(info.index_sources.values())
    where = (
        f"retrieves from this index's {pool:,} sources (the paper's full setting: about 930K)"
        if info.run["setting"] == "full"
        else "ranks each question's own facts, as the paper's restricted setting does"
    )
    return (
        f"> **Not comparable with the published numbers.** These are {len(info.questions)} "
        f"questions of `{data}` (split {info.run['split']}), not the WebQA test set the "
        f"published baselines were measured on; this run {where}. The sample corpus bundled "
        "with mmrag is a small fictional world in WebQA's format, not WebQA. Baselines are "
        "shown for orientation only, labelled with their setting."
    )


def _run_table(info: WebQARunInfo) -> str:
    run = info.run
    engine = run["engine"] + (f" ({run['model']})" if run.get("model") else " (embedded model)")
    if run.get("engine_url"):
        engine += f" at {run['engine_url']}"
    counts = ", ".join(f"{n:,} {modality}" for modality, n in sorted(info.index_sources.items()))
    setting = {
        "full": "full: candidates retrieved from the whole index",
        "restricted": "restricted: candidates are the question's own positive + negative facts",
    }[run["setting"]]
    rows = [
        ("data", ", ".join(run["data"])),
        ("split", run["split"]),
        ("setting", setting),
        ("index", f"{run['index']} ({counts})"),
        ("images", info.images_note),
        ("retrievers / fusion", f"{' + '.join(info.retrievers)} / {info.fusion}"),
        (
            "source selection",
            f"reranker {run['reranker']}, threshold {info.threshold:g}, at most "
            f"{run['max_sources']} sources of the top {run['rerank_k']}",
        ),
        ("generator", f"{engine}, at most {run['max_tokens']} tokens, temperature 0"),
        (
            "questions",
            f"{len(info.questions)} ({info.ran_now} answered in this run, "
            f"{info.resumed} resumed from the partial file)",
        ),
        ("wall time", f"{info.seconds:.1f} s (this process, models loading included)"),
        ("FL", info.fl_note),
    ]
    return md.table(["", ""], rows)


def _overall(info: WebQARunInfo, scores: WebQAScores) -> str:
    metrics = scores.overall.metrics
    rows = [["all", len(info.questions), *(md.percent(metrics[k]) for k, _ in METRICS)]]
    for name, subset in scores.by_query_type.items():
        rows.append([name, subset["n"], *(md.percent(subset[k]) for k, _ in METRICS)])
    return md.table(["questions", "n", *(label for _, label in METRICS)], rows)


def _ours(scores: WebQAScores, baseline: Published) -> float | None:
    if baseline.subset == "all":
        return scores.overall.metrics.get(baseline.metric)
    return scores.by_query_type.get(baseline.subset, {}).get(baseline.metric)


def _published(info: WebQARunInfo, scores: WebQAScores) -> str:
    labels = dict(METRICS)
    rows = [
        [
            labels[b.metric],
            b.subset,
            b.system,
            b.setting,
            b.source,
            f"{b.value:g}",
            md.percent(_ours(scores, b)),
        ]
        for b in webqa_baselines(info.run["setting"])
    ]
    headers = ["metric", "questions", "system", "setting", "source", "published", "ours"]
    return md.table(headers, rows)


def _per_qcate(info: WebQARunInfo, scores: WebQAScores) -> str:
    errors = Counter(
        q.qcate for q in info.questions if info.record(q).get("generation_error") is not None
    )
    rows = []
    for qcate, entry in scores.overall.metrics["by_qcate"].items():
        counts = [
            len(info.record(q)["prediction"]["sources"]) for q in info.questions if q.qcate == qcate
        ]
        rows.append(
            [
                qcate,
                entry["n"],
                *(md.percent(entry[k]) for k, _ in METRICS),
                errors[qcate],
                md.number(sum(counts) / len(counts), 2),
            ]
        )
    headers = ["Qcate", "n", *(label for _, label in METRICS), "generation errors", "sources"]
    return md.table(headers, rows)


def _sources(info: WebQARunInfo) -> str:
    predicted = [info.record(q)["prediction"]["sources"] for q in info.questions]
    images = sum(isinstance(s, int) for sources in predicted for s in sources)
    snippets = sum(isinstance(s, str) for sources in predicted for s in sources)
    empty = sum(not sources for sources in predicted)
    rows = [
        ("image sources predicted", images),
        ("snippet sources predicted", snippets),
        ("mean sources per question", md.number((images + snippets) / len(predicted), 2)),
        ("questions without a source", empty),
    ]
    return md.table(["", "count"], rows)


def _errors(info: WebQARunInfo) -> str:
    failed = [
        (q.guid, q.qcate, info.record(q)["generation_error"])
        for q in info.questions
        if info.record(q).get("generation_error") is not None
    ]
    empty = sum(not info.record(q)["prediction"]["answer"].strip() for q in info.questions)
    lines = [f"{len(failed)} generation errors; {empty} empty answers (they score 0)."]
    if failed:
        lines += ["", md.table(["guid", "Qcate", "error"], failed[:20])]
        if len(failed) > 20:
            lines.append(f"\n... and {len(failed) - 20} more.")
    return "\n".join(lines)


def _timings(info: WebQARunInfo) -> str:
    timings = [info.record(q).get("timings") or {} for q in info.questions]
    return md.timing_table(timings, STAGES)


def _bars(info: WebQARunInfo, scores: WebQAScores, metric: str) -> list[Bar]:
    metrics = scores.overall.metrics
    bars = [Bar(f"all\nn={len(info.questions)}", _scaled(metrics[metric]))]
    for qcate, entry in metrics["by_qcate"].items():
        kinds = Counter(query_type(q) for q in info.questions if q.qcate == qcate)
        group = kinds.most_common(1)[0][0] or "all"
        bars.append(Bar(f"{qcate}\nn={entry['n']}", _scaled(entry[metric]), group))
    return bars


def _scaled(value: float | None) -> float | None:
    return None if value is None else 100 * value


def write_charts(info: WebQARunInfo, scores: WebQAScores) -> dict[str, Path]:
    run = info.run
    with_fl = scores.overall.metrics["fl"] is not None
    baselines = webqa_baselines(run["setting"])
    labels = dict(METRICS)
    paths = chart_paths(info.out, with_fl)
    for metric, path in paths.items():
        references = [
            Reference(b.value, f"published: {b.label}", b.subset)
            for b in reference_lines(baselines, metric)
        ]
        bar_chart(
            path,
            _bars(info, scores, metric),
            title=f"WebQA {labels[metric]} per Qcate: mmrag, {run['setting']} setting, "
            f"{run['split']} ({len(info.questions)} questions)\n"
            "published baselines (dashed) are on other data: orientation only",
            ylabel=f"{labels[metric]} (%)",
            references=references,
        )
    return paths


def write_webqa_report(info: WebQARunInfo, scores: WebQAScores) -> Path:
    """Charts first, then the Markdown that links them; returns the report's path."""
    charts = write_charts(info, scores)
    run = info.run
    sections = [
        f"# mmrag eval run webqa: {run['setting']} setting, split {run['split']}",
        _comparability(info),
        "## Run",
        _run_table(info),
        "## Scores (percent)",
        "Official WebQA metrics (`evaluation.scoring.webqa`, the code `mmrag eval score` "
        "uses), means over questions; FL×Acc is the mean of per-question products. Image "
        "queries are those whose gold sources are images.",
        _overall(info, scores),
        "## Published baselines (percent)",
        _published(info, scores),
        "## Per Qcate (percent)",
        _per_qcate(info, scores),
        "## Sources",
        _sources(info),
        "## Generation",
        _errors(info),
        "## Mean time per question",
        "Seconds per stage; resumed questions keep the timings of the run that answered them.",
        _timings(info),
        "## Charts",
        "\n\n".join(f"![{name} per Qcate]({path.name})" for name, path in charts.items()),
    ]
    if scores.overall.warnings:
        sections += ["## Scoring notes", "\n".join(f"- {w}" for w in scores.overall.warnings)]
    report = sibling(info.out, ".report.md")
    atomic_write_text(report, "\n\n".join(sections) + "\n")
    return report
