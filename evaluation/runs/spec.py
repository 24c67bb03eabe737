"""What a benchmark brings to `eval run`: a `Benchmark` subclass, its spec.

The driver (`driver.run`) does what every run does; a spec says only what is its benchmark's
own: its options, how to read its questions and find their images, what a runner is, the
submission's format, how it is scored, and the sections of its report. Most of it is data
(class attributes); methods are for what cannot be. One instance serves one run.
docs/ARCHITECTURE.md walks through adding a benchmark.
"""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mmrag.core.options import settings_from
from mmrag.evaluation.runs.cluster import Work, WorkFactory
from mmrag.evaluation.runs.report import Chart, number
from mmrag.evaluation.scoring import ScoreReport

if TYPE_CHECKING:  # models load only when a run starts; `mmrag --help` stays instant
    from mmrag.core.settings import Settings

Item = TypeVar("Item")
Record = dict[str, Any]


class RecordFields(BaseModel):
    """The fields of a runner's record that the driver's report reads; a benchmark's own
    model adds those its submission and report read. A resumed partial file's records are
    validated against it line by line (strictly: "3" is no 3), other fields pass unchecked."""

    model_config = ConfigDict(extra="allow", strict=True)

    timings: dict[str, float | str] = Field(default_factory=dict)


def record_problem(fields: type[RecordFields], record: Any) -> str | None:
    """What keeps `record` from the submission and the report, in a few words; None if
    nothing does."""
    try:
        fields.model_validate(record)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        message = first["msg"][:1].lower() + first["msg"][1:]
        return f"{where + ': ' if where else ''}{message}"
    return None


class Figure(NamedTuple):
    """One score as the summary line prints it: `label value`, value x`scale`."""

    label: str
    metric: str
    digits: int = 3
    scale: float = 1.0

    def format(self, metrics: dict[str, Any]) -> str:
        value = metrics.get(self.metric)
        return f"{self.label} {number(None if value is None else self.scale * value, self.digits)}"


@dataclass
class RunInfo(Generic[Item]):
    """What was run and what came of it, apart from the scores: what reports are written from."""

    out: Path
    run: dict[str, Any]  # the checkpoint header's description of the run
    items: list[Item]  # the questions the submission holds, in file order
    records: dict[str, Record]  # by item id: what each runner returned
    ran_now: int
    resumed: int
    skipped: list[Path]  # missing images whose questions --skip-missing left unanswered
    seconds: float
    in_flight: int
    answered_by: str
    key: Callable[[Item], str]

    def record(self, item: Item) -> Record:
        return self.records[self.key(item)]

    def all_records(self) -> list[Record]:
        return [self.record(item) for item in self.items]


class Benchmark(ABC, Generic[Item]):
    """One benchmark's spec. The driver builds one per run (`self.args`, the parsed command
    line) and calls its methods in the order `driver.run` lists; what a method learns (a split
    read from the data, a pipeline built for scoring) it keeps on `self` for the later ones."""

    # The command: `eval run NAME`, its help, and what it writes.
    name: ClassVar[str]
    help: ClassVar[str]
    description: ClassVar[str]
    # Its modules in evaluation.loaders and evaluation.scoring, which `eval score` uses too.
    loader: ClassVar[ModuleType]
    scoring: ClassVar[ModuleType]
    # Its inputs: what --data names, and the option naming the folder of the images (None: the
    # runner reads no image files, and nothing is checked).
    data_help: ClassVar[str]
    images_option: ClassVar[str | None] = None
    images_help: ClassVar[str] = ""
    images_hint: ClassVar[str] = ""  # what to check when images are missing, if not the option
    answers_without_image: ClassVar[bool] = False  # offers --answer-without-image
    # What the submission holds for a question --skip-missing leaves unanswered (its help).
    skipped_in_submission: ClassVar[str] = "they are left out of the submission"
    # What a record must hold (`RecordFields`): a resumed partial file's lines are checked.
    record_fields: ClassVar[type[RecordFields]] = RecordFields
    # What a resumed partial file must match besides the data and images: the options (paths
    # resolved) and settings that change the answers.
    described_options: ClassVar[tuple[str, ...]] = ()
    described_settings: ClassVar[tuple[str, ...]] = ()
    # The summary line and the report.
    headline: ClassVar[tuple[Figure, ...]]  # the scores the summary line gives
    noun: ClassVar[str] = "question"  # what the summary and the report count
    # What the progress bar and the summary line call a run, and the report's title; both
    # formatted with the run's description (`{split}`).
    label: ClassVar[str] = "{bench}"
    heading: ClassVar[str] = "{bench}"
    stages: ClassVar[tuple[str, ...]] = ()  # timing stages listed first, in this order
    scores_heading: ClassVar[str] = "Scores"
    # When the published numbers would be comparable (formatted as `label` is).
    comparable_when: ClassVar[str] = ""
    orientation: ClassVar[str] = "Baselines are shown for orientation only."
    no_gold: ClassVar[str] = "no answers"  # why a run is not scored

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    @classmethod
    def add_inputs(cls, parser: argparse.ArgumentParser) -> None:
        """The data options, listed before the options every run takes."""
        parser.add_argument("--data", type=Path, required=True, help=cls.data_help)
        if cls.images_option is not None:
            parser.add_argument(cls.images_option, type=Path, required=True, help=cls.images_help)

    @staticmethod
    def add_options(parser: argparse.ArgumentParser) -> None:
        """The benchmark's other options (models, formats), listed after them."""

    def check(self) -> None:
        """Refusals that need nothing loaded (an input file that does not exist)."""

    @abstractmethod
    def load(self) -> list[Item]:
        """Every question of the data, in file order (the driver applies `--limit`)."""

    @abstractmethod
    def key(self, item: Item) -> str:
        """The question's id in the checkpoint."""

    @property
    def images_dest(self) -> str:
        """The images option's attribute of `args` (and key in the run's description)."""
        assert self.images_option is not None
        return self.images_option.removeprefix("--").replace("-", "_")

    def images_folder(self) -> Path:
        return getattr(self.args, self.images_dest)

    def image_paths(self, item: Item) -> list[Path]:
        """The files the runner will read for this question."""
        return []

    def unanswered(self, item: Item, missing: Path) -> Record | None:
        """The record of a question --skip-missing leaves unanswered, where the format lists
        every question; None: the submission leaves it out."""
        return None

    def settings(self) -> Settings:
        """The settings the command line and config name (and may refuse)."""
        return settings_from(self.args)

    def describe(self, settings: Settings) -> dict[str, Any]:
        """What a resumed partial file must match: everything that changes the answers."""
        data = self.args.data
        described: dict[str, Any] = {"bench": self.name, "data": str(data.resolve())}
        if self.images_option is not None:
            described[self.images_dest] = str(self.images_folder().resolve())
        for name in self.described_options:
            value = getattr(self.args, name)
            described[name] = str(value.resolve()) if isinstance(value, Path) else value
        fields = set(self.described_settings)
        return {**described, **settings.model_dump(mode="json", include=fields)}

    @abstractmethod
    def runner_factory(self, settings: Settings, todo: Sequence[Item]) -> Callable[..., Work]:
        """`factory(settings)` builds a runner, here or on each Ray worker (so it must
        pickle); `todo` are the questions still to answer."""

    def local_runner(self, settings: Settings, items: Sequence[Item]) -> WorkFactory | None:
        """This process's runner when it differs from the factory's (WebQA keeps the pipeline
        it scores with); models load here, after a cluster has accepted the run."""
        return None

    @abstractmethod
    def submission(self, items: Sequence[Item], records: dict[str, Record]) -> str:
        """The official prediction file's text."""

    @abstractmethod
    def scorable(self, items: Sequence[Item]) -> bool:
        """Whether the data has the gold answers scoring needs."""

    def score(self, items: Sequence[Item], records: dict[str, Record]) -> ScoreReport:
        """The official metrics of the file written at `args.out`, read back as `eval score`
        reads it (`records`, the runners', for what the file does not hold)."""
        out, data = self.args.out, self.args.data
        predictions = self.loader.load_predictions(out)
        return self.scoring.score(items, predictions, gold_label=str(data), pred_label=str(out))

    def counts(self, info: RunInfo[Item]) -> list[str]:
        """Counts the summary line adds after answered, resumed and skipped."""
        return []

    def comparability(self, info: RunInfo[Item]) -> str:
        """Why the published numbers are not comparable with this run's."""
        skipped = len(info.skipped)
        return (
            "> **Not comparable with the published numbers** unless "
            f"{self.comparable_when.format(**info.run)}: it answered {info.ran_now + info.resumed} "
            f"{self.noun}s of `{Path(info.run['data']).name}`"
            + (f", leaving out {skipped} whose image was missing" if skipped else "")
            + f". {self.orientation}"
        )

    @abstractmethod
    def run_rows(self, info: RunInfo[Item]) -> list[tuple[str, Any]]:
        """The Run table's rows that describe this benchmark's setup."""

    @abstractmethod
    def scores_section(self, info: RunInfo[Item], scores: Any) -> str:
        """The scores beside the published ones."""

    def sections(self, info: RunInfo[Item], scores: Any | None) -> list[str]:
        """Its own report sections after the scores and counts: headings and bodies."""
        return []

    def count_rows(self, info: RunInfo[Item]) -> list[tuple[str, Any]]:
        """The report's Counts table: how often each thing worth knowing happened."""
        return []

    def charts(self, info: RunInfo[Item], scores: Any) -> list[Chart]:
        """The charts of a scored run."""
        return []
