"""`mmrag eval run webqa`: WebQA through the QA pipeline (`webqa_runner`), scored and
reported (`webqa_report`).

Source selection and answer writing are the pipeline's own in both of the paper's settings,
so a run measures what `mmrag ask` and the service do. This process builds the pipeline even
when Ray workers answer: scoring reads cited sources from its index and judges them with its
verifier.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from mmrag.core.options import add_pipeline_options, settings_from
from mmrag.evaluation.loaders import webqa as loader
from mmrag.evaluation.runs import webqa_report
from mmrag.evaluation.runs.checkpoint import check_file
from mmrag.evaluation.runs.cluster import WorkFactory
from mmrag.evaluation.runs.report import Chart, engine_name
from mmrag.evaluation.runs.spec import Benchmark, Figure, Record, RecordFields, RunInfo
from mmrag.evaluation.runs.webqa_report import WebQAScores
from mmrag.evaluation.runs.webqa_runner import (
    SETTINGS,
    WebQARunner,
    build_runner,
    check_facts_indexed,
)
from mmrag.evaluation.scoring.webqa import AttributionCheck
from mmrag.indexes.corpus.webqa import WebQAQuestion

if TYPE_CHECKING:  # the pipeline loads only when a run starts; `mmrag --help` stays instant
    from mmrag.core.settings import Settings

# The settings that change what a run answers: a partial file made with other values of these
# cannot be resumed into this run.
PIPELINE_FIELDS = ("engine", "model", "engine_url", "retrievers", "fusion", "reranker")
PIPELINE_FIELDS += ("threshold", "max_sources", "rerank_k", "max_tokens", "verifier")
PIPELINE_FIELDS += ("guided_citations",)
FL_MISSING = (
    "not computed: FL needs BART; pass --fl-model facebook/bart-large-cnn (or a local copy of it)"
)
SETTING_ROWS = {
    "full": "full: candidates retrieved from the whole index",
    "restricted": "restricted: candidates are the question's own positive + negative facts",
}


def submission(questions: Sequence[WebQAQuestion], records: dict[str, Record]) -> dict[str, Any]:
    """The official submission, `{guid: {"sources": [...], "answer": "..."}}`, in file order."""
    return {q.guid: records[q.guid]["prediction"] for q in questions}


class WebQAPrediction(BaseModel):
    model_config = ConfigDict(strict=True)

    sources: list[int | str]
    answer: str


class WebQARecord(RecordFields):
    prediction: WebQAPrediction
    citations: list[str] = Field(default_factory=list)
    attribution: str = ""
    generation_error: str | None = None


class WebQARun(Benchmark[WebQAQuestion]):
    record_fields = WebQARecord
    name = "webqa"
    help = "WebQA: retrieve, select sources, answer; retrieval F1, FL, Acc"
    description = "Writes {guid: {sources: [...], answer: ...}} (the WebQA submission format)."
    headline = tuple(
        Figure(label, metric, 2, 100)
        for label, metric in (
            ("retrieval F1", "retrieval_f1"),
            ("Acc", "acc"),
            ("FL", "fl"),
            ("FL×Acc", "fl_x_acc"),
            ("citation recall", "citation_recall"),
            ("precision", "citation_precision"),
            ("declined", "decline_rate"),
        )
    )
    label = "webqa {setting} {split}"
    heading = "webqa: {setting} setting, split {split}"
    stages = ("retrieve_s", "rerank_s", "first_token_s", "generate_s", "total_s")
    scores_heading = "Scores (percent)"

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        # Every WebQA question is answerable: unless --abstain says otherwise, an answer no
        # source supports is kept, uncited, rather than declined (the service declines).
        self.options = {"setting": args.setting, "k": args.k, "abstain": args.abstain or "never"}

    @classmethod
    def add_inputs(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--data", type=Path, action="append", required=True, help="WebQA_*.json (repeatable)"
        )
        parser.add_argument(
            "--index", type=Path, required=True, help="index built from those files"
        )
        parser.add_argument(
            "--setting",
            choices=SETTINGS,
            default="full",
            help="full: retrieve from the whole index; restricted: rank the question's own "
            "positive and negative facts (default full)",
        )
        parser.add_argument("--split", default="val", help="questions of this split (default val)")
        parser.add_argument(
            "--images", type=Path, help="imgs.tsv (checked; the index reads its own image store)"
        )

    @staticmethod
    def add_options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--k", type=int, help="full setting: candidates retrieved (--rerank-k)")
        parser.add_argument(
            "--fl-model", help="BART for fluency (hub name or directory); without it FL is null"
        )
        parser.add_argument("--fl-batch-size", type=int, default=16, help="default %(default)s")
        add_pipeline_options(parser)

    def check(self) -> None:
        check_file("--images", self.args.images)

    def load(self) -> list[WebQAQuestion]:
        restricted = self.args.setting == "restricted"
        return loader.load_gold_files(self.args.data, self.args.split, with_negatives=restricted)

    def key(self, item: WebQAQuestion) -> str:
        return item.guid

    def settings(self) -> Settings:
        return settings_from(self.args).model_copy(update={"index": self.args.index})

    def describe(self, settings: Settings) -> dict[str, Any]:
        args = self.args
        return {
            "bench": "webqa",
            "split": args.split,
            "data": [str(path.resolve()) for path in args.data],
            "index": str(args.index.resolve()),
            **self.options,
            **settings.model_dump(mode="json", include=set(PIPELINE_FIELDS)),
        }

    def runner_factory(self, settings: Settings, todo: Sequence[WebQAQuestion]) -> partial[Any]:
        return partial(build_runner, **self.options)

    def local_runner(self, settings: Settings, items: Sequence[WebQAQuestion]) -> WorkFactory:
        """The FL model (with --fl-model) and the pipeline scoring uses, answering here too."""
        from mmrag.core.components import build_pipeline

        self.fl = None
        if self.args.fl_model:
            from mmrag.evaluation.metrics.fluency import BartLogLikelihood

            batch, device = self.args.fl_batch_size, self.args.device
            self.fl = BartLogLikelihood(self.args.fl_model, batch_size=batch, device=device)
        self.pipeline = pipeline = build_pipeline(settings)
        if self.args.setting == "restricted":
            check_facts_indexed(items, pipeline)
        return lambda: WebQARunner(pipeline, **self.options)

    def submission(self, items: Sequence[WebQAQuestion], records: dict[str, Record]) -> str:
        return json.dumps(submission(items, records), indent=2) + "\n"

    def scorable(self, items: Sequence[WebQAQuestion]) -> bool:
        return True

    def score(self, items: Sequence[WebQAQuestion], records: dict[str, Record]) -> WebQAScores:
        store = self.pipeline.retriever.collection.store
        cited = {q.guid: records[q.guid].get("citations", []) for q in items}
        attribution = AttributionCheck(self.pipeline.attributor, store.find, cited=cited)
        predictions = loader.load_predictions(self.args.out)
        return webqa_report.score_run(
            items, predictions, fl=self.fl, attribution=attribution, pred_label=str(self.args.out)
        )

    def counts(self, info: RunInfo[WebQAQuestion]) -> list[str]:
        errors = sum(record.get("generation_error") is not None for record in info.all_records())
        return [f"{errors} generation errors"]

    def _sources_by_modality(self) -> dict[str, Any]:
        return self.pipeline.retriever.collection.store.rows_by_modality

    def comparability(self, info: RunInfo[WebQAQuestion]) -> str:
        data = ", ".join(Path(path).name for path in info.run["data"])
        where = "ranks each question's own facts, as the paper's restricted setting does"
        if info.run["setting"] == "full":
            pool = sum(len(rows) for rows in self._sources_by_modality().values())
            where = f"retrieves from this index's {pool:,} sources (the paper's full setting: "
            where += "about 930K)"
        return (
            f"> **Not comparable with the published numbers.** These are {len(info.items)} "
            f"questions of `{data}` (split {info.run['split']}), not the WebQA test set the "
            f"published baselines were measured on; this run {where}. The sample corpus bundled "
            "with mmrag is a small fictional world in WebQA's format, not WebQA. Baselines are "
            "shown for orientation only, labelled with their setting."
        )

    def run_rows(self, info: RunInfo[WebQAQuestion]) -> list[tuple[str, Any]]:
        run, pipeline = info.run, self.pipeline
        collection = pipeline.retriever.collection
        sizes = self._sources_by_modality().items()
        counts = ", ".join(f"{len(rows):,} {modality}" for modality, rows in sorted(sizes))
        configured = (collection.manifest.get("images") or {}).get("path")
        own = f"`{(collection.root / configured).resolve()}`" if configured else "none"
        images = f"--images not given; the index's own image store: {own}"
        if self.args.images is not None:
            given = f"--images `{self.args.images}` given and found"
            images = f"{given}; the index reads its own image store: {own}"
        engine = engine_name(run) + (f" at {run['engine_url']}" if run.get("engine_url") else "")
        selection = f"reranker {run['reranker']}, threshold {pipeline.selector.threshold:g}"
        selection += f", at most {run['max_sources']} sources of the top {run['rerank_k']}"
        retrievers = " + ".join(pipeline.retriever.retrievers)
        return [
            ("split", run["split"]),
            ("setting", SETTING_ROWS[run["setting"]]),
            ("index", f"{run['index']} ({counts})"),
            ("images", images),
            ("retrievers / fusion", f"{retrievers} / {pipeline.retriever.fusion}"),
            ("source selection", selection),
            ("generator", f"{engine}, at most {run['max_tokens']} tokens, temperature 0"),
            ("FL", f"BART model `{self.args.fl_model}`" if self.fl else FL_MISSING),
        ]

    def scores_section(self, info: RunInfo[WebQAQuestion], scores: WebQAScores) -> str:
        return webqa_report.overall(info, scores)

    def sections(self, info: RunInfo[WebQAQuestion], scores: WebQAScores) -> list[str]:
        return webqa_report.sections(info, scores)

    def charts(self, info: RunInfo[WebQAQuestion], scores: WebQAScores) -> list[Chart]:
        return webqa_report.charts(info, scores)
