"""What the run reports are made of: Markdown tables, bar charts and the published baselines.

Charts are drawn with matplotlib's Agg canvas (no display, no pyplot): a `Figure` on
`FigureCanvasAgg` keeps no global state, so charts render the same on a headless server and
from a thread; PNGs are written atomically like every other output.

A published number means little without its setting: the WebQA paper's retrieval F1 of 68.9 is
the restricted setting (about 40 candidates per question), 20-28 the full one (930K sources).
Reports put these beside ours only with that label, and only where the setting matches.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmrag.indexes.atomic import atomic_write_bytes


def percent(value: float | None, digits: int = 2) -> str:
    """A 0..1 score as the leaderboards print it (x100); n/a where it was not computed."""
    return "n/a" if value is None else f"{100 * value:.{digits}f}"


def number(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def cell(value: Any) -> str:
    """Table cells stay on one line and cannot end the cell early."""
    return " ".join(str(value).split()).replace("|", "\\|")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = [
        "| " + " | ".join(cell(h) for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def engine_name(run: Mapping[str, Any]) -> str:
    """The generator a run's description names: its engine and model, or the embedded one."""
    return f"{run['engine']} ({run.get('model') or 'embedded model'})"


def timing_table(timings: Sequence[Mapping[str, Any]], order: Sequence[str] = ()) -> str:
    """Mean and max seconds per stage (the keys with numbers: `stopped_in` names a stage),
    stages in `order` first, then as met."""
    seconds = [{k: v for k, v in t.items() if isinstance(v, int | float)} for t in timings]
    stages = [stage for stage in order if any(stage in t for t in seconds)]
    stages += [s for s in dict.fromkeys(key for t in seconds for key in t) if s not in stages]
    rows = []
    for stage in stages:
        values = [t[stage] for t in seconds if stage in t]
        mean = sum(values) / len(values)
        rows.append([stage.removesuffix("_s"), len(values), number(mean), number(max(values))])
    return table(["stage", "questions", "mean s", "max s"], rows)


GROUP_COLOURS = {
    "all": "#4d4d4d",
    "image queries": "#1f77b4",
    "text queries": "#ff7f0e",
    "published": "#d62728",
}


@dataclass(frozen=True)
class Bar:
    label: str
    value: float | None  # percent; None is drawn as an empty slot marked n/a
    group: str = "all"  # colour, and which reference line it is read against


@dataclass(frozen=True)
class Reference:
    value: float
    label: str
    group: str = "all"
    bars: tuple[int, int] | None = None  # draw over bars first..last only; None: full width


@dataclass(frozen=True)
class Chart:
    """A bar chart a report links, drawn beside the prediction file as OUT's stem + suffix."""

    suffix: str
    alt: str
    bars: Sequence[Bar]
    title: str
    ylabel: str
    references: Sequence[Reference] = ()


def bar_chart(
    path: Path,
    bars: Sequence[Bar],
    *,
    title: str,
    ylabel: str,
    references: Sequence[Reference] = (),
    top: float = 100.0,
) -> None:
    """Bars with their values printed on top, dashed published references, legend below."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    figure = Figure(figsize=(max(6.0, 0.9 * len(bars) + 2.0), 5.2), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    positions = range(len(bars))
    heights = [bar.value or 0.0 for bar in bars]
    colours = [GROUP_COLOURS.get(bar.group, GROUP_COLOURS["all"]) for bar in bars]
    drawn = axes.bar(positions, heights, color=colours, width=0.7)
    labels = ["n/a" if bar.value is None else f"{bar.value:.1f}" for bar in bars]
    axes.bar_label(drawn, labels=labels, padding=2, fontsize=9)
    handles = []
    for reference in references:
        colour = GROUP_COLOURS.get(reference.group, GROUP_COLOURS["all"])
        style = {"color": colour, "linestyle": "--", "linewidth": 1.5, "label": reference.label}
        if reference.bars is None:
            handles.append(axes.axhline(reference.value, **style))
        else:
            first, last = reference.bars
            handles.append(axes.hlines(reference.value, first - 0.4, last + 0.4, **style))
    groups = dict.fromkeys(bar.group for bar in bars)
    if len(groups) > 1:
        handles += [
            Patch(color=GROUP_COLOURS.get(group, GROUP_COLOURS["all"]), label=f"ours: {group}")
            for group in groups
        ]
    axes.set_xticks(list(positions), [bar.label for bar in bars], fontsize=9)
    axes.set_ylim(0, max(top, *(h * 1.1 for h in heights), *(r.value * 1.1 for r in references)))
    axes.set_ylabel(ylabel)
    axes.set_title(title, fontsize=11)
    axes.grid(axis="y", alpha=0.3)
    axes.set_axisbelow(True)
    if handles:
        figure.legend(handles=handles, loc="outside lower center", fontsize=8, ncols=1)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    atomic_write_bytes(path, buffer.getvalue())


WEBQA_PAPER = "WebQA paper, test set"
WEBQA_RELEASE = "WebQA baseline release, val"
AOKVQA_PAPER = "A-OKVQA paper"


@dataclass(frozen=True)
class Published:
    """One published figure, on the scale our reports use (percent; METEOR 0..1)."""

    metric: str  # our metric key: retrieval_f1, acc, fl_x_acc, mc, da, bleu, meteor
    value: float
    system: str
    setting: str  # WebQA: full, restricted, oracle sources, any; A-OKVQA: the split
    subset: str  # all, image queries, text queries
    source: str

    @property
    def label(self) -> str:
        subset = "" if self.subset == "all" else f", {self.subset}"
        return f"{self.system} ({self.setting}{subset}; {self.source}): {self.value:g}"


WEBQA: tuple[Published, ...] = (
    Published("retrieval_f1", 20.43, "BM25", "full", "image queries", WEBQA_PAPER),
    Published("retrieval_f1", 28.15, "BM25", "full", "text queries", WEBQA_PAPER),
    Published("retrieval_f1", 9.71, "CLIP top-2", "full", "image queries", WEBQA_PAPER),
    Published("retrieval_f1", 13.96, "CLIP top-2", "full", "text queries", WEBQA_PAPER),
    Published("retrieval_f1", 21.68, "CLIP top-20 + VLP", "full", "image queries", WEBQA_PAPER),
    Published("retrieval_f1", 26.01, "CLIP top-20 + VLP", "full", "text queries", WEBQA_PAPER),
    Published("retrieval_f1", 68.9, "VLP", "restricted", "all", WEBQA_PAPER),
    Published("fl_x_acc", 22.6, "VLP", "restricted", "all", WEBQA_PAPER),
    Published("fl_x_acc", 52.4, "human", "any", "all", WEBQA_PAPER),
    Published("acc", 44.29, "VLP + x101fpn", "oracle sources", "image queries", WEBQA_RELEASE),
)

AOKVQA: tuple[Published, ...] = (
    Published("mc", 60.3, "GPV-2", "val", "all", AOKVQA_PAPER),
    Published("mc", 53.7, "GPV-2", "test", "all", AOKVQA_PAPER),
    Published("da", 48.6, "GPV-2", "val", "all", AOKVQA_PAPER),
    Published("da", 40.7, "GPV-2", "test", "all", AOKVQA_PAPER),
    Published("mc", 56.74, "GT rationale -> GPT-3 (oracle)", "val", "all", AOKVQA_PAPER),
    Published("bleu", 10.2, "ClipCap rationales", "val", "all", AOKVQA_PAPER),
    Published("meteor", 0.271, "ClipCap rationales", "val", "all", AOKVQA_PAPER),
)

TOLOKA_PAPER = "Toloka VQA paper (Ustalov et al., 2023)"
TOLOKA: tuple[Published, ...] = (
    Published("iou", 87.154, "crowd (non-expert annotators)", "private test", "all", TOLOKA_PAPER),
    Published("iou", 76.347, "WSDM Cup winner", "private test", "all", TOLOKA_PAPER),
    Published("iou", 44.851, "OFA + SAM (zero-shot)", "private test", "all", TOLOKA_PAPER),
    Published("iou", 21.292, "YOLOR + CLIP (zero-shot)", "private test", "all", TOLOKA_PAPER),
)

VLQA_PAPER = "VLQA paper (Sampat et al., 2020)"
VLQA: tuple[Published, ...] = (Published("accuracy", 84.0, "human", "test", "all", VLQA_PAPER),)

# Settings whose numbers stand beside any WebQA run: human performance, and Acc with the gold
# sources given (an upper reference for the answer writer whatever the retrieval setting).
_ANY_WEBQA_SETTING = ("any", "oracle sources")


def webqa_baselines(setting: str) -> list[Published]:
    return [b for b in WEBQA if b.setting == setting or b.setting in _ANY_WEBQA_SETTING]


def aokvqa_baselines(split: str) -> list[Published]:
    return [b for b in AOKVQA if b.setting == split]


def reference_lines(baselines: Iterable[Published], metric: str) -> list[Published]:
    """For a chart: the strongest published figure of `metric` per subset (one line each)."""
    best: dict[str, Published] = {}
    for baseline in baselines:
        if baseline.metric != metric:
            continue
        if baseline.subset not in best or baseline.value > best[baseline.subset].value:
            best[baseline.subset] = baseline
    return list(best.values())
