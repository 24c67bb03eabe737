"""What a WebQA run reports beyond the skeleton every run shares: its scores overall and per
query type, the per-Qcate, source, attribution and generation tables, and per-Qcate charts.

Scores are computed once overall and once per query type (image or text queries: the modality
of the gold sources, as the paper splits them), with BART log-likelihoods memoised across the
three passes. Published baselines stand only beside the subset and setting they were measured
on, labelled with both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mmrag.evaluation.loaders.webqa import WebQAPrediction
from mmrag.evaluation.metrics.fluency import LogLikelihood
from mmrag.evaluation.runs.report import (
    Bar,
    Chart,
    Published,
    Reference,
    number,
    percent,
    reference_lines,
    table,
    webqa_baselines,
)
from mmrag.evaluation.runs.spec import RunInfo
from mmrag.evaluation.scoring import ScoreReport
from mmrag.evaluation.scoring import webqa as scoring
from mmrag.indexes.corpus.webqa import WebQAQuestion

METRICS = (("retrieval_f1", "retrieval F1"), ("fl", "FL"), ("acc", "Acc"), ("fl_x_acc", "FL×Acc"))
ATTRIBUTION = (
    ("citation_recall", "citation recall"),
    ("citation_precision", "citation precision"),
    ("decline_rate", "declined"),
    ("invented_rate", "invented facts"),
)
COLUMNS = METRICS + ATTRIBUTION
ORIGINS = {
    "model": "cited by the model, each citation verified",
    "verified": "cited by the verifier (the model's citations did not hold)",
    "extractive": "replaced by a source sentence (no source supported the answer)",
    "declined": "declined: no source answers the question",
    "unsupported": "kept uncited: no source supports it (--abstain never)",
}
Info = RunInfo[WebQAQuestion]


class MemoLogLikelihood:
    """A LogLikelihood that scores each distinct (source, target) pair once."""

    def __init__(self, inner: LogLikelihood) -> None:
        self.inner = inner
        self.cache: dict[tuple[str, str], float] = {}

    def __call__(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        new = [pair for pair in dict.fromkeys(pairs) if pair not in self.cache]
        if new:
            self.cache.update(zip(new, self.inner(new), strict=True))
        return [self.cache[pair] for pair in pairs]


@dataclass
class WebQAScores(ScoreReport):
    """The overall report (metrics: retrieval_f1, fl, acc, fl_x_acc and by_qcate), and the
    metrics of each query type."""

    by_query_type: dict[str, dict[str, Any]] = field(default_factory=dict)


def query_type(question: WebQAQuestion) -> str | None:
    """WebQA's split of questions by the modality of their gold sources (None: no gold)."""
    if question.is_image_query:
        return "image queries"
    return "text queries" if question.pos_sources else None


def score_run(
    questions: Sequence[WebQAQuestion],
    predictions: Mapping[str, WebQAPrediction],
    *,
    fl: LogLikelihood | None,
    attribution: scoring.AttributionCheck | None = None,
    pred_label: str,
) -> WebQAScores:
    memo = MemoLogLikelihood(fl) if fl is not None else None
    options = {"fl": memo, "attribution": attribution, "pred_label": pred_label}
    overall = scoring.score(questions, predictions, **options)
    by_type: dict[str, dict[str, Any]] = {}
    for name in ("image queries", "text queries"):
        subset = [q for q in questions if query_type(q) == name]
        if subset:
            metrics = scoring.score(subset, predictions, **options).metrics
            metrics.pop("by_qcate")
            by_type[name] = {"n": len(subset), **metrics}
    return WebQAScores(overall.metrics, overall.warnings, by_type)


def overall(info: Info, scores: WebQAScores) -> str:
    rows = [["all", len(info.items), *(percent(scores.metrics.get(k)) for k, _ in COLUMNS)]]
    for name, subset in scores.by_query_type.items():
        rows.append([name, subset["n"], *(percent(subset.get(k)) for k, _ in COLUMNS)])
    return (
        "Official WebQA metrics (`evaluation.scoring.webqa`, the code `mmrag eval score` "
        "uses), means over questions; FL×Acc is the mean of per-question products. Image "
        "queries are those whose gold sources are images.\n\n"
        + table(["questions", "n", *(label for _, label in COLUMNS)], rows)
    )


def _ours(scores: WebQAScores, baseline: Published) -> float | None:
    if baseline.subset == "all":
        return scores.metrics.get(baseline.metric)
    return scores.by_query_type.get(baseline.subset, {}).get(baseline.metric)


def _published(info: Info, scores: WebQAScores) -> str:
    labels = dict(METRICS)
    rows = [
        [labels[b.metric], b.subset, b.system, b.setting, b.source, f"{b.value:g}", ours]
        for b, ours in (
            (b, percent(_ours(scores, b))) for b in webqa_baselines(info.run["setting"])
        )
    ]
    headers = ["metric", "questions", "system", "setting", "source", "published", "ours"]
    return table(headers, rows)


def _per_qcate(info: Info, scores: WebQAScores) -> str:
    failed = [q.qcate for q in info.items if info.record(q).get("generation_error") is not None]
    errors = Counter(failed)
    rows = []
    for qcate, entry in scores.metrics["by_qcate"].items():
        counts = [
            len(info.record(q)["prediction"]["sources"]) for q in info.items if q.qcate == qcate
        ]
        scored = [percent(entry.get(k)) for k, _ in COLUMNS]
        mean = number(sum(counts) / len(counts), 2)
        rows.append([qcate, entry["n"], *scored, errors[qcate], mean])
    headers = ["Qcate", "n", *(label for _, label in COLUMNS), "generation errors", "sources"]
    return table(headers, rows)


def _sources(info: Info) -> str:
    predicted = [record["prediction"]["sources"] for record in info.all_records()]
    images = sum(isinstance(s, int) for sources in predicted for s in sources)
    snippets = sum(isinstance(s, str) for sources in predicted for s in sources)
    rows = [
        ("image sources predicted", images),
        ("snippet sources predicted", snippets),
        ("mean sources per question", number((images + snippets) / len(predicted), 2)),
        ("questions without a source", sum(not sources for sources in predicted)),
    ]
    return table(["", "count"], rows)


def _attribution(info: Info) -> str:
    """Where each answer's citations came from once checked, and what the ALCE columns mean."""
    origins = Counter(record.get("attribution") or "" for record in info.all_records())
    share = {origin: percent(count / len(info.items)) for origin, count in origins.items()}
    rows = [
        (ORIGINS.get(origin, "no answer (generation error)"), count, share[origin])
        for origin, count in sorted(origins.items(), key=lambda item: -item[1])
    ]
    return (
        f"Declining: `--abstain {info.run['abstain']}`; verifier `{info.run['verifier']}`. "
        "Citation recall: the cited sources together support the answer (ALCE); citation "
        "precision: the share of citations needed; both from the answers' own citations "
        "(`eval score` reads the submission's `sources` as the citations). Invented facts: "
        "answers stating a number or name found in neither the question nor the sources they "
        "cite.\n\n" + table(["answers", "count", "share (%)"], rows)
    )


def _errors(info: Info) -> str:
    failed = [
        (q.guid, q.qcate, info.record(q)["generation_error"])
        for q in info.items
        if info.record(q).get("generation_error") is not None
    ]
    empty = sum(not record["prediction"]["answer"].strip() for record in info.all_records())
    lines = [f"{len(failed)} generation errors; {empty} empty answers (they score 0)."]
    if failed:
        lines += ["", table(["guid", "Qcate", "error"], failed[:20])]
        if len(failed) > 20:
            lines.append(f"\n... and {len(failed) - 20} more.")
    return "\n".join(lines)


def sections(info: Info, scores: WebQAScores) -> list[str]:
    return [
        "## Published baselines (percent)",
        _published(info, scores),
        "## Per Qcate (percent)",
        _per_qcate(info, scores),
        "## Sources",
        _sources(info),
        "## Attribution",
        _attribution(info),
        "## Generation",
        _errors(info),
    ]


def _bars(info: Info, scores: WebQAScores, metric: str) -> list[Bar]:
    metrics = scores.metrics
    bars = [Bar(f"all\nn={len(info.items)}", _scaled(metrics[metric]))]
    for qcate, entry in metrics["by_qcate"].items():
        kinds = Counter(query_type(q) for q in info.items if q.qcate == qcate)
        group = kinds.most_common(1)[0][0] or "all"
        bars.append(Bar(f"{qcate}\nn={entry['n']}", _scaled(entry[metric]), group))
    return bars


def _scaled(value: float | None) -> float | None:
    return None if value is None else 100 * value


def charts(info: Info, scores: WebQAScores) -> list[Chart]:
    """Retrieval F1, Acc and (with a BART model) FL×Acc per Qcate."""
    run = info.run
    names = ["retrieval_f1", "acc", *(["fl_x_acc"] if scores.metrics["fl"] is not None else [])]
    baselines = webqa_baselines(run["setting"])
    labels = dict(METRICS)
    return [
        Chart(
            f".{metric}.png",
            f"{metric} per Qcate",
            _bars(info, scores, metric),
            title=f"WebQA {labels[metric]} per Qcate: mmrag, {run['setting']} setting, "
            f"{run['split']} ({len(info.items)} questions)\n"
            "published baselines (dashed) are on other data: orientation only",
            ylabel=f"{labels[metric]} (%)",
            references=[
                Reference(b.value, f"published: {b.label}", b.subset)
                for b in reference_lines(baselines, metric)
            ],
        )
        for metric in names
    ]
