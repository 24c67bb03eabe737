"""Bar charts for the run reports, drawn with matplotlib's Agg canvas (no display, no pyplot).

A `Figure` on `FigureCanvasAgg` keeps no global state, so charts render the same on a headless
server and from a thread; the PNG is written atomically like every other output.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mmrag.indexes.atomic import atomic_write_bytes

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
