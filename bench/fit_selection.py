"""Fit the weights and the decline threshold of answer selection (`verification.selection`).

    python -m bench.fit_selection --out docs/bench/fit-selection.json

Every question of the development sets is asked of its index as the pipeline asks it: its
retrieved sources, the selected ones and the runners-up, are the pool, and every statement of
the pool is a candidate with its `features`. A candidate is right when its source is one of
the question's gold sources and it states every gold fact (a yes/no question's: gives the gold
verdict; a choice's: names the gold option). A logistic model over the features (log-scaled,
as `selection.Model` reads them) is fitted on every candidate; its regularisation is chosen by
the question-level accuracy of five folds split by question, and the threshold under which a
question is declined by that accuracy on the whole development set: right when the best
candidate is right and clears it, or when an unanswerable question's best does not.

Development sets (never the held-out ones):
- the sample corpus: `bench/data/grounding_questions.json` (open questions written for it),
  WebQA_sample.json's questions (its gold sources, the facts of its answers), and
  `data/sample/unanswerable.json`;
- `bench/data/styles/`: the development half of the corpus written in other styles.
The weights are written to `generation/verification/weights.json`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import machine, write_report  # noqa: E402
from mmrag.core.components import build_pipeline  # noqa: E402
from mmrag.core.pipeline import Timings, runners_up  # noqa: E402
from mmrag.core.settings import Settings  # noqa: E402
from mmrag.generation.reading.question import Question, read_question  # noqa: E402
from mmrag.generation.reading.text import read  # noqa: E402
from mmrag.generation.verification import selection  # noqa: E402
from mmrag.generation.verification.statements import Statement, statements  # noqa: E402
from mmrag.indexes.atomic import atomic_write_text  # noqa: E402

SAMPLE = REPO / "data" / "sample"
WEIGHTS = REPO / "generation" / "verification" / "weights.json"


@dataclass(frozen=True)
class Asked:
    """A development question: its gold sources and facts, or none (unanswerable)."""

    question: str
    sources: frozenset[str]
    facts: tuple[str, ...]
    answer: str = ""  # the gold answer, where it is a sentence: a choice's names its option
    any_fact: bool = False  # an open question's facts are each a right thing to say
    corpus: str = "sample"


def sample_questions() -> list[Asked]:
    """The sample corpus's development questions."""
    asked = []
    grounding = json.loads((REPO / "bench" / "data" / "grounding_questions.json").read_text())
    for item in grounding["questions"]:
        facts = tuple(item["facts"])
        asked.append(Asked(item["question"], frozenset(item["sources"]), facts, any_fact=True))
    for item in json.loads((SAMPLE / "WebQA_sample.json").read_text()).values():
        question = item["Q"].strip('"')
        gold = [f.get("image_id") or f.get("snippet_id") for f in item["img_posFacts"]]
        gold += [f["snippet_id"] for f in item["txt_posFacts"]]
        answer = item["A"][0].strip('"')
        said, asked_terms = read(answer).terms, read(question).terms
        facts = sorted(said.key - asked_terms.words) or sorted(said.words - asked_terms.words)
        asked.append(Asked(question, frozenset(map(str, gold)), tuple(facts), answer))
    for item in json.loads((SAMPLE / "unanswerable.json").read_text())["questions"]:
        asked.append(Asked(item["question"], frozenset(), ()))
    return asked


def styles_questions(half: str) -> list[Asked]:
    data = REPO / "bench" / "data" / "styles" / "questions.json"
    if not data.exists():
        return []
    items = json.loads(data.read_text())["questions"]
    return [
        Asked(
            i["question"],
            frozenset(i["sources"]),
            tuple(i["facts"]),
            any_fact=i.get("kind") == "open",
            corpus="styles",
        )
        for i in items
        if i["half"] == half
    ]


def right(asked: Asked, question: Question, statement: Statement) -> bool:
    """Whether a candidate answers as the gold says."""
    if statement.source.id not in asked.sources:
        return False
    if question.kind == "yes_no":
        found = selection.verdict(question, statement.text, statement.context)
        gold = asked.answer.lower().split(maxsplit=1)[:1] or [None]
        return found is not None and gold[0] in (None, f"{found},", found)
    if question.kind == "choice" and asked.answer:
        named = read(asked.answer).terms.words
        return any(option <= named for option in question.choices)
    said = read(statement.said).terms.words | read(statement.about).terms.words
    stated = [read(fact).terms.words <= said for fact in asked.facts]
    return any(stated) if asked.any_fact else all(stated)


def candidates(
    pipeline, asked: Asked
) -> tuple[Question, list[tuple[Statement, list[float], bool]]]:
    question = read_question(asked.question)
    chosen = pipeline.select(asked.question, Timings())
    given = [scored.source for scored in chosen.selected]
    pool = [*given, *runners_up(chosen)]
    rows = []
    for statement in statements(pool):
        if question.kind == "yes_no":
            if selection.verdict(question, statement.text, statement.context) is None:
                continue
        elif question.kind == "choice" and not selection.picks_one(question, statement.text):
            continue
        values = selection.features(question, statement, runner_up=statement.number > len(given))
        rows.append((statement, values, right(asked, question, statement)))
    return question, rows


def logs(values: list[float]) -> list[float]:
    return [math.log(selection.FLOOR + value) for value in values[1:]]


def question_accuracy(groups, weights: np.ndarray, bias: float, threshold: float) -> float:
    """Share of questions answered right: the best candidate right and over the threshold, or
    for a question with no right candidate (unanswerable here), none over it."""
    hits = 0
    for answerable, rows in groups:
        best, best_right = -1.0, False
        for x, y in rows:
            p = 1 / (1 + math.exp(-(bias + float(np.dot(weights, x)))))
            if p > best:
                best, best_right = p, y
        hits += (best >= threshold and best_right) if answerable else best < threshold
    return hits / len(groups)


def fit(groups, c: float):
    from sklearn.linear_model import LogisticRegression

    x = np.array([row for _, rows in groups for row, _ in rows])
    y = np.array([label for _, rows in groups for _, label in rows])
    model = LogisticRegression(C=c, max_iter=2000)
    model.fit(x, y)
    return model.coef_[0], float(model.intercept_[0])


def best_threshold(groups, weights, bias) -> tuple[float, float]:
    grid = [t / 100 for t in range(5, 96)]
    scored = [(question_accuracy(groups, weights, bias, t), -abs(t - 0.5), t) for t in grid]
    accuracy, _, threshold = max(scored)
    return threshold, accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample-index", type=Path, default=REPO / "var" / "sample-index")
    parser.add_argument("--styles-index", type=Path, default=None)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--dry-run", action="store_true", help="report, do not write weights")
    args = parser.parse_args()
    data = []
    pipeline = build_pipeline(Settings.load(None, index=args.sample_index))
    for asked in sample_questions():
        data.append((asked, *candidates(pipeline, asked)))
    styles = styles_questions("dev")
    if styles:
        from bench.styles import build_styles_index

        index = args.styles_index or Path(tempfile.mkdtemp()) / "styles-index"
        if not (index / "manifest.json").exists():
            build_styles_index(index)
        pipeline = build_pipeline(Settings.load(None, index=index))
        for asked in styles:
            data.append((asked, *candidates(pipeline, asked)))
    # A question no candidate answers right (unanswerable, or a comparison of two sources
    # that the model's answer must make) is answered right by extraction when it declines.
    groups = [
        (any(y for *_, y in rows), [(logs(values), y) for _, values, y in rows])
        for _, _, rows in data
    ]
    answerable_with_right = sum(any(y for _, y in rows) for _, rows in groups)
    folds = 5
    scores = {}
    for c in (0.1, 0.3, 1.0, 3.0, 10.0):
        accuracies = []
        for fold in range(folds):
            train = [g for i, g in enumerate(groups) if i % folds != fold]
            test = [g for i, g in enumerate(groups) if i % folds == fold]
            weights, bias = fit(train, c)
            threshold, _ = best_threshold(train, weights, bias)
            accuracies.append(question_accuracy(test, weights, bias, threshold))
        scores[c] = float(np.mean(accuracies))
    c = max(scores, key=lambda k: (scores[k], -k))
    weights, bias = fit(groups, c)
    threshold, accuracy = best_threshold(groups, weights, bias)
    fitted = {
        "features": list(selection.FEATURES),
        "weights": [round(bias, 4), *(round(float(w), 4) for w in weights)],
        "threshold": threshold,
        "fitted_on": f"{len(groups)} development questions ({sum(len(r) for _, r in groups)} "
        "candidates): python -m bench.fit_selection",
    }
    if not args.dry_run:
        stored = json.loads(WEIGHTS.read_text())
        stored["selection"] = fitted
        atomic_write_text(WEIGHTS, json.dumps(stored, indent=2) + "\n")
    misses = []
    for asked, question, rows in data:
        scored = [
            (selection.Model(tuple(fitted["weights"]), threshold).probability(v), s, y)
            for s, v, y in rows
        ]
        best = max(scored, key=lambda r: r[0], default=None)
        ok = (
            best is not None and best[0] >= threshold and best[2]
            if any(y for *_, y in rows)
            else best is None or best[0] < threshold
        )
        if not ok:
            misses.append(
                {
                    "question": asked.question,
                    "kind": question.kind,
                    "answerable": bool(asked.sources),
                    "facts": list(asked.facts),
                    "best": None if best is None else [round(best[0], 3), best[1].said, best[2]],
                    "right_candidates": sum(y for _, _, y in rows),
                }
            )
    report = {
        "command": " ".join(sys.argv),
        "machine": machine(),
        "questions": len(groups),
        "answerable_with_a_right_candidate": answerable_with_right,
        "c_by_cross_validation": scores,
        "c": c,
        "development_accuracy": round(accuracy, 3),
        "fitted": fitted,
        "misses": misses,
    }
    write_report(report, args.out)


if __name__ == "__main__":
    main()
