"""`mmrag eval run webqa`: WebQA through the QA pipeline, scored and reported.

The two settings of the WebQA paper differ only in the candidates: `full` retrieves from the
whole index; `restricted` ranks the question's own positive and negative facts (about 40) with
the same retrievers and fusion. Source selection and answer writing are the pipeline's own in
both (one `QAPipeline.answer` call per question), so a run measures what `mmrag ask` and the
service do.

Steps, each refusable input checked before models load: the questions of the split
(`--limit`), the partial file (`--resume`), `--images`; the FL model (if asked for) and the
pipeline, built once; the question loop, each answer appended to the partial file; the
submission written atomically, read back and scored as `eval score` would (overall and per
query type, BART log-likelihoods memoised); the report (`OUT.report.md`, numbers printed as the
leaderboard does) and per-Qcate charts beside it, with published baselines only beside the
subset and setting they were measured on.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmrag.core.options import add_pipeline_options, settings_from
from mmrag.evaluation.errors import EvaluationError
from mmrag.evaluation.loaders import webqa as loader
from mmrag.evaluation.loaders.webqa import WebQAPrediction
from mmrag.evaluation.metrics.fluency import LogLikelihood
from mmrag.evaluation.runs.checkpoint import (
    Answering,
    Checkpoint,
    add_run_options,
    check_file,
    check_run_options,
    print_warnings,
    sibling,
)
from mmrag.evaluation.runs.report import (
    Bar,
    Published,
    Reference,
    bar_chart,
    number,
    percent,
    reference_lines,
    table,
    timing_table,
    webqa_baselines,
)
from mmrag.evaluation.scoring import ScoreReport
from mmrag.evaluation.scoring import webqa as scoring
from mmrag.evaluation.scoring.webqa import AttributionCheck
from mmrag.generation.verification.attribution import AbstainPolicy
from mmrag.indexes.atomic import atomic_write_text
from mmrag.indexes.corpus.webqa import WebQAQuestion
from mmrag.indexes.sources import Source

if TYPE_CHECKING:  # the pipeline loads only when a run starts; `mmrag --help` stays instant
    from mmrag.core.pipeline import QAPipeline
    from mmrag.core.settings import Settings


SETTINGS = ("full", "restricted")

# The settings that change what a run answers: a partial file made with other values of these
# cannot be resumed into this run.
PIPELINE_FIELDS = (
    "engine",
    "model",
    "engine_url",
    "retrievers",
    "fusion",
    "reranker",
    "threshold",
    "max_sources",
    "rerank_k",
    "max_tokens",
    "verifier",
    "guided_citations",
)


def pipeline_description(settings: Settings) -> dict[str, Any]:
    return settings.model_dump(mode="json", include=set(PIPELINE_FIELDS))


def submission_id(source: Source) -> int | str:
    """As the WebQA eval server takes them: image ids are integers, snippet ids strings."""
    return int(source.id) if source.modality == "image" else source.id


def own_facts(question: WebQAQuestion) -> list[str]:
    """The restricted setting's candidates: the question's positive and negative facts."""
    return [source.id for source in (*question.pos_sources, *question.neg_sources)]


def check_facts_indexed(questions: Sequence[WebQAQuestion], pipeline: QAPipeline) -> None:
    """Refuse before the first question, not midway, an index built from other WebQA files."""
    store = pipeline.retriever.collection.store
    missing = [
        (question.guid, source_id)
        for question in questions
        for source_id in own_facts(question)
        if store.row_of(source_id) is None
    ]
    if missing:
        guid, source_id = missing[0]
        raise EvaluationError(
            f"{len(missing)} facts of the selected questions are not in the index "
            f"{pipeline.retriever.collection.root} (e.g. source {source_id!r} of question "
            f"{guid}); the restricted setting needs an index built from the same WebQA files"
        )


class WebQARunner:
    """Answers one question in the chosen setting; returns what the checkpoint stores."""

    def __init__(
        self,
        pipeline: QAPipeline,
        setting: str,
        *,
        k: int | None = None,
        abstain: AbstainPolicy = "never",
    ) -> None:
        if setting not in SETTINGS:
            raise EvaluationError(f"unknown setting {setting!r}; use {' or '.join(SETTINGS)}")
        self.pipeline = pipeline
        self.setting = setting
        self.k = k
        self.abstain = abstain

    def __call__(self, question: WebQAQuestion) -> dict[str, Any]:
        started = time.perf_counter()
        candidates = own_facts(question) if self.setting == "restricted" else None
        result = self.pipeline.answer(
            question.question, k=self.k, candidates=candidates, abstain=self.abstain
        )
        answer = result.answer
        return {
            "prediction": {
                "sources": [submission_id(scored.source) for scored in result.selection.selected],
                "answer": answer.text_without_markers,
            },
            "citations": [citation.source_id for citation in answer.citations],
            "attribution": answer.attribution,
            "timings": {**result.timings.as_dict(), "total_s": time.perf_counter() - started},
            "generation_error": answer.generation_error,
        }


def build_runner(
    settings: Settings, *, setting: str, k: int | None, abstain: AbstainPolicy
) -> WebQARunner:
    """A runner with its own pipeline: what each Ray worker of `--executor ray` builds."""
    from mmrag.core.components import build_pipeline

    return WebQARunner(build_pipeline(settings), setting, k=k, abstain=abstain)


def submission(
    questions: Sequence[WebQAQuestion], records: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The official submission, `{guid: {"sources": [...], "answer": "..."}}`, in file order."""
    return {q.guid: records[q.guid]["prediction"] for q in questions}


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
class WebQAScores:
    overall: ScoreReport  # metrics: retrieval_f1, fl, acc, fl_x_acc and by_qcate
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
    return WebQAScores(overall, by_type)


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
    concurrency: int = 1  # questions in flight (--concurrency)
    executor: str = "this process"

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
        ("answered by", info.executor),
        ("concurrency", _concurrency(info.concurrency)),
        ("FL", info.fl_note),
    ]
    return table(["", ""], rows)


def _concurrency(n: int) -> str:
    if n == 1:
        return "1 question at a time"
    return f"{n} questions in flight at once (stage times include waiting for the generator)"


def _overall(info: WebQARunInfo, scores: WebQAScores) -> str:
    metrics = scores.overall.metrics
    rows = [["all", len(info.questions), *(percent(metrics.get(k)) for k, _ in COLUMNS)]]
    for name, subset in scores.by_query_type.items():
        rows.append([name, subset["n"], *(percent(subset.get(k)) for k, _ in COLUMNS)])
    return table(["questions", "n", *(label for _, label in COLUMNS)], rows)


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
            percent(_ours(scores, b)),
        ]
        for b in webqa_baselines(info.run["setting"])
    ]
    headers = ["metric", "questions", "system", "setting", "source", "published", "ours"]
    return table(headers, rows)


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
                *(percent(entry.get(k)) for k, _ in COLUMNS),
                errors[qcate],
                number(sum(counts) / len(counts), 2),
            ]
        )
    headers = ["Qcate", "n", *(label for _, label in COLUMNS), "generation errors", "sources"]
    return table(headers, rows)


def _sources(info: WebQARunInfo) -> str:
    predicted = [info.record(q)["prediction"]["sources"] for q in info.questions]
    images = sum(isinstance(s, int) for sources in predicted for s in sources)
    snippets = sum(isinstance(s, str) for sources in predicted for s in sources)
    empty = sum(not sources for sources in predicted)
    rows = [
        ("image sources predicted", images),
        ("snippet sources predicted", snippets),
        ("mean sources per question", number((images + snippets) / len(predicted), 2)),
        ("questions without a source", empty),
    ]
    return table(["", "count"], rows)


def _attribution(info: WebQARunInfo) -> str:
    """Where each answer's citations came from once checked, and what the ALCE columns mean."""
    origins = Counter(info.record(q).get("attribution") or "" for q in info.questions)
    rows = [
        (
            ORIGINS.get(origin, "no answer (generation error)"),
            count,
            percent(count / len(info.questions)),
        )
        for origin, count in sorted(origins.items(), key=lambda item: -item[1])
    ]
    return "\n".join(
        [
            f"Declining: `--abstain {info.run['abstain']}`; verifier `{info.run['verifier']}`. "
            "Citation recall: the cited sources together support the answer (ALCE); citation "
            "precision: the share of citations needed; both from the answers' own citations "
            "(`eval score` reads the submission's `sources` as the citations). Invented facts: "
            "answers stating a number or name found in neither the question nor the sources "
            "they cite.",
            "",
            table(["answers", "count", "share (%)"], rows),
        ]
    )


def _errors(info: WebQARunInfo) -> str:
    failed = [
        (q.guid, q.qcate, info.record(q)["generation_error"])
        for q in info.questions
        if info.record(q).get("generation_error") is not None
    ]
    empty = sum(not info.record(q)["prediction"]["answer"].strip() for q in info.questions)
    lines = [f"{len(failed)} generation errors; {empty} empty answers (they score 0)."]
    if failed:
        lines += ["", table(["guid", "Qcate", "error"], failed[:20])]
        if len(failed) > 20:
            lines.append(f"\n... and {len(failed) - 20} more.")
    return "\n".join(lines)


def _timings(info: WebQARunInfo) -> str:
    timings = [info.record(q).get("timings") or {} for q in info.questions]
    return timing_table(timings, STAGES)


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
        "## Attribution",
        _attribution(info),
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


def images_note(images: Path | None, collection: Any) -> str:
    """The index reads images through its own store; say which, and what --images was."""
    configured = (collection.manifest.get("images") or {}).get("path")
    own = f"`{(collection.root / configured).resolve()}`" if configured else "none"
    if images is None:
        return f"--images not given; the index's own image store: {own}"
    return f"--images `{images}` given and found; the index reads its own image store: {own}"


def add_parser(benches: argparse._SubParsersAction) -> None:
    webqa = benches.add_parser(
        "webqa",
        help="WebQA: retrieve, select sources, answer; retrieval F1, FL, Acc",
        description="Writes {guid: {sources: [...], answer: ...}} (the WebQA submission format).",
    )
    webqa.add_argument(
        "--data", type=Path, action="append", required=True, help="WebQA_*.json (repeatable)"
    )
    webqa.add_argument("--index", type=Path, required=True, help="index built from those files")
    webqa.add_argument(
        "--setting",
        choices=SETTINGS,
        default="full",
        help="full: retrieve from the whole index; restricted: rank the question's own "
        "positive and negative facts (default full)",
    )
    webqa.add_argument("--split", default="val", help="questions of this split (default val)")
    webqa.add_argument(
        "--images", type=Path, help="imgs.tsv (checked; the index reads its own image store)"
    )
    add_run_options(webqa)
    webqa.add_argument("--k", type=int, help="full setting: candidates retrieved (--rerank-k)")
    webqa.add_argument(
        "--fl-model", help="BART for fluency (hub name or directory); without it FL is null"
    )
    webqa.add_argument("--fl-batch-size", type=int, default=16, help="default %(default)s")
    add_pipeline_options(webqa)
    webqa.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mmrag.core.components import build_pipeline

    started = time.perf_counter()
    check_run_options(args)
    check_file("--images", args.images)
    restricted = args.setting == "restricted"
    questions = loader.load_gold_files(args.data, args.split, with_negatives=restricted)
    questions = questions[: args.limit]
    settings = settings_from(args).model_copy(update={"index": args.index})
    # Every WebQA question is answerable: unless --abstain says otherwise, an answer no source
    # supports is kept, uncited, rather than declined (the service's default is to decline).
    abstain: AbstainPolicy = args.abstain or "never"
    description = {
        "bench": "webqa",
        "setting": args.setting,
        "split": args.split,
        "data": [str(path.resolve()) for path in args.data],
        "index": str(args.index.resolve()),
        "k": args.k,
        "abstain": abstain,
        **pipeline_description(settings),
    }
    checkpoint = Checkpoint.open(args.out, description, resume=args.resume)
    answering = Answering(
        args, settings, partial(build_runner, setting=args.setting, k=args.k, abstain=abstain)
    )
    with answering:  # a cluster that cannot take the run refuses it before models load here
        fl = None
        if args.fl_model:
            from mmrag.evaluation.metrics.fluency import BartLogLikelihood

            fl = BartLogLikelihood(args.fl_model, batch_size=args.fl_batch_size, device=args.device)
        pipeline = build_pipeline(settings)
        if restricted:
            check_facts_indexed(questions, pipeline)
        ran = answering.run(
            questions,
            lambda q: q.guid,
            checkpoint,
            desc=f"webqa {args.setting} {args.split}",
            local=lambda: WebQARunner(pipeline, args.setting, k=args.k, abstain=abstain),
        )
    text = json.dumps(submission(questions, checkpoint.records), indent=2) + "\n"
    checkpoint.finish(args.out, text)

    predictions = loader.load_predictions(args.out)
    attribution = AttributionCheck(
        pipeline.attributor,
        pipeline.retriever.collection.store.find,
        cited={q.guid: checkpoint.records[q.guid].get("citations", []) for q in questions},
    )
    scores = score_run(
        questions, predictions, fl=fl, attribution=attribution, pred_label=str(args.out)
    )
    print_warnings(scores.overall.warnings)
    collection = pipeline.retriever.collection
    info = WebQARunInfo(
        out=args.out,
        run=checkpoint.run,
        questions=questions,
        records=checkpoint.records,
        ran_now=ran,
        resumed=len(questions) - ran,
        seconds=time.perf_counter() - started,
        index_sources={m: len(r) for m, r in collection.store.rows_by_modality.items()},
        images_note=images_note(args.images, collection),
        fl_note=f"BART model `{args.fl_model}`" if fl else FL_MISSING,
        retrievers=pipeline.retriever.retrievers,
        fusion=pipeline.retriever.fusion,
        threshold=pipeline.selector.threshold,
        concurrency=answering.in_flight,
        executor=answering.describe(),
    )
    report = write_webqa_report(info, scores)
    metrics = scores.overall.metrics
    errors = sum(checkpoint.records[q.guid].get("generation_error") is not None for q in questions)
    print(
        f"webqa {args.setting} {args.split}: {len(questions)} questions ({ran} answered, "
        f"{info.resumed} resumed, {errors} generation errors) in {info.seconds:.1f} s; "
        f"retrieval F1 {percent(metrics['retrieval_f1'])}, Acc {percent(metrics['acc'])}, "
        f"FL {percent(metrics['fl'])}, FL×Acc {percent(metrics['fl_x_acc'])}, "
        f"citation recall {percent(metrics['citation_recall'])}, "
        f"precision {percent(metrics['citation_precision'])}, "
        f"declined {percent(metrics['decline_rate'])}; "
        f"wrote {args.out}, {report}, {sibling(args.out, '.*.png')}"
    )
    return 0
