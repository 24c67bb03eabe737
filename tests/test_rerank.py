"""Source selection: thresholds, caps and the cross-encoder backend loaded by path."""

from __future__ import annotations

import numpy as np
import pytest

from mmrag.evaluation.metrics.retrieval import source_f1
from mmrag.indexes.errors import InputError
from mmrag.indexes.sources import Source
from mmrag.retrieval.rerank import CrossEncoderScorer, JudgeScorer, SourceSelector, fit_threshold
from mmrag.retrieval.types import Candidate
from tests.tiny_models import tiny_cross_encoder


def candidates(n: int) -> list[Candidate]:
    return [
        Candidate(Source(f"s{i}", "text", f"title {i}", f"text {i}"), 10.0 - i, i + 1, "bm25")
        for i in range(n)
    ]


class FixedScores:
    """The scorer's output is this unit's input: fixed probabilities exercise the selection rule."""

    name = "fixed"

    def __init__(self, scores):
        self.scores = np.asarray(scores, dtype=float)

    def relevance(self, question, sources):
        return self.scores[: len(sources)]


def selected_ids(selection) -> list[str]:
    return [s.source.id for s in selection.selected]


def test_keeps_sources_above_the_vlp_threshold_best_first():
    selection = SourceSelector(FixedScores([0.1, 0.9, 0.3, 0.19]), max_sources=5).select(
        "q", candidates(4)
    )
    assert selected_ids(selection) == ["s1", "s2"]
    assert [s.relevance for s in selection.considered] == [0.9, 0.3, 0.19, 0.1]


def test_caps_at_max_sources_and_only_scores_the_top_k():
    selector = SourceSelector(FixedScores([0.9, 0.8, 0.7, 0.6]), max_sources=2, k=3)
    selection = selector.select("q", candidates(4))
    assert selected_ids(selection) == ["s0", "s1"]
    assert len(selection.considered) == 3


def test_keeps_the_best_when_none_passes_unless_told_not_to():
    below = FixedScores([0.05, 0.1])
    assert selected_ids(SourceSelector(below).select("q", candidates(2))) == ["s1"]
    assert SourceSelector(below, min_sources=0).select("q", candidates(2)).selected == []


def test_below_the_threshold_a_runner_up_as_relevant_as_the_best_is_kept_with_it():
    """Calibrated fusion gave a bakery's sign photo 0.244 and the snippet naming its founder
    0.243 for "Who founded the Lantern Bakery?": keeping one by a hair lost the answer."""
    near_tie = FixedScores([0.244, 0.243, 0.2, 0.1])
    selector = SourceSelector(near_tie, threshold=0.3, max_sources=3)
    assert selected_ids(selector.select("q", candidates(4))) == ["s0", "s1"]
    assert selected_ids(selector.select("q", candidates(4), max_sources=1)) == ["s0"]
    clear_best = SourceSelector(FixedScores([0.244, 0.2, 0.1]), threshold=0.3)
    assert selected_ids(clear_best.select("q", candidates(3))) == ["s0"]


def test_equal_relevance_keeps_retrieval_order():
    selection = SourceSelector(FixedScores([0.5, 0.5, 0.5]), max_sources=3).select(
        "q", candidates(3)
    )
    assert selected_ids(selection) == ["s0", "s1", "s2"]


@pytest.mark.parametrize(
    "kwargs",
    [{"threshold": 1.5}, {"max_sources": 0}, {"k": 0}, {"min_sources": 3, "max_sources": 2}],
)
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(InputError):
        SourceSelector(FixedScores([]), **kwargs)


def test_cross_encoder_loads_by_path_and_gives_probabilities(tmp_path):
    scorer = CrossEncoderScorer(str(tiny_cross_encoder(tmp_path / "ce")), device="cpu")
    sources = [c.source for c in candidates(3)]
    scores = scorer.relevance("what is in title 1", sources)
    assert scores.shape == (3,) and np.all((scores > 0) & (scores < 1))
    assert scorer.relevance("q", []).shape == (0,)
    selection = SourceSelector(scorer, threshold=0.0, max_sources=2).select("q", candidates(3))
    assert len(selection.selected) == 2


def test_cross_encoder_that_cannot_load_names_itself(tmp_path):
    with pytest.raises(InputError, match=r"cannot load cross-encoder .*missing"):
        CrossEncoderScorer(str(tmp_path / "missing"))


def test_judge_scorer_asks_the_judge_about_each_source():
    class KeywordJudge:
        def relevance(self, question, source):
            return 0.9 if source.id == "s2" else 0.05

    selection = SourceSelector(JudgeScorer(KeywordJudge())).select("q", candidates(4))
    assert selected_ids(selection) == ["s2"]


def test_without_a_scorer_calibrated_retrieval_scores_are_the_relevance():
    pool = [
        Candidate(c.source, p, c.rank, "bm25+text:calibrated")
        for c, p in zip(candidates(3), [0.7, 0.25, 0.1], strict=True)
    ]
    assert selected_ids(SourceSelector(None).select("q", pool)) == ["s0", "s1"]


def test_max_sources_can_be_lowered_per_question():
    selector = SourceSelector(FixedScores([0.9, 0.8, 0.7]), max_sources=3)
    assert selected_ids(selector.select("q", candidates(3), max_sources=1)) == ["s0"]
    assert len(selector.select("q", candidates(3)).selected) == 3
    with pytest.raises(InputError, match="max_sources must be at least 1"):
        selector.select("q", candidates(3), max_sources=0)


def test_fit_threshold_picks_the_f1_best_cut():
    """Two questions, worked by hand: gold s0 with a weak s1 behind it; gold s0 and s1."""
    first = [
        Candidate(c.source, p, c.rank, "x") for c, p in zip(candidates(2), [0.9, 0.35], strict=True)
    ]
    second = [
        Candidate(c.source, p, c.rank, "x") for c, p in zip(candidates(2), [0.8, 0.6], strict=True)
    ]
    best, f1_at = fit_threshold([("q1", first, ["s0"]), ("q2", second, ["s0", "s1"])], 2, source_f1)
    # Below 0.35 q1 keeps a wrong second source (F1 2/3); from 0.4 to 0.6 both are right.
    assert f1_at[0.3] == pytest.approx((2 / 3 + 1) / 2)
    assert f1_at[0.4] == pytest.approx(1.0) and f1_at[0.6] == pytest.approx(1.0)
    assert f1_at[0.65] == pytest.approx((1 + 2 / 3) / 2)
    assert best == 0.4
