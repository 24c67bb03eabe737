"""Published numbers from the benchmark spec, each with the setting it was measured in.

A number means little without its setting: the WebQA paper's retrieval F1 of 68.9 is the
restricted setting (about 40 candidates per question), 20-28 the full one (930K sources). The
reports put these beside ours only with that label, and only where the setting matches.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

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
