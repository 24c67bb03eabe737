"""Fit the weights and the decline threshold of answer selection (`verification.selection`).

    python -m bench.fit_selection --out docs/bench/fit-selection.json

Every question of the development sets is asked of its index as the pipeline asks it: its
retrieved sources, the selected ones and the runners-up, are the pool, and every statement of
the pool is a candidate with its `features`. A candidate is right when its source is one of
the question's gold sources and it states every gold fact (a yes/no question's: gives the gold
verdict; a choice's: names the gold option). The model is a conditional logit over the
features (log-scaled, as `selection.Model` reads them), fitted on each question's choice among
its candidates and declining, so a question is declined where no candidate scores above
declining; its regularisation is chosen by the question-level accuracy of five folds split by
question. `--candidates FILE` keeps the candidates' features, for refitting without asking.

Development sets (never the held-out ones):
- the sample corpus: `bench/data/grounding_questions.json` (open questions written for it),
  WebQA_sample.json's questions (its gold sources, the facts of its answers), and
  `data/sample/unanswerable.json`;
- `bench/data/styles/`: the development half of the corpus written in other styles, indexed
  alone as `bench/styles.py` indexes it.
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
from bench.styles import build_index, load, states  # noqa: E402
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


def styles_questions() -> list[Asked]:
    """The development half of the corpus written in other styles (never the held-out one)."""
    from bench.styles import load

    _, items = load("dev")
    return [
        Asked(
            i["question"],
            frozenset(i["sources"]),
            tuple(i["facts"]),
            answer=i.get("verdict") or "",
            any_fact=i["kind"] == "open",
            corpus="styles",
        )
        for i in items
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
    stated = [states(fact, f"{statement.about} {statement.said}") for fact in asked.facts]
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


def asked_questions(sample_index: Path, styles_work: Path | None) -> list[dict]:
    """Every development question asked of its index, with its candidates' features."""
    data = []
    pipeline = build_pipeline(Settings.load(None, index=sample_index))
    asked = [(pipeline, a) for a in sample_questions()]
    work = styles_work or Path(tempfile.mkdtemp())
    index = work / "dev" / "index"
    if not (index / "manifest.json").exists():
        build_index(load("dev")[0], work / "dev")
    styles = build_pipeline(Settings.load(None, index=index))
    asked += [(styles, a) for a in styles_questions()]
    for pipe, one in asked:
        question, rows = candidates(pipe, one)
        data.append(
            {
                "question": one.question,
                "kind": question.kind,
                "corpus": one.corpus,
                "facts": list(one.facts),
                "rows": [
                    {"values": values, "right": right, "said": statement.said}
                    for statement, values, right in rows
                ],
            }
        )
    return data


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


def fit(groups, c: float) -> tuple[np.ndarray, float]:
    """Weights and bias of a conditional logit over each question's candidates and declining:
    P(candidate) = exp(z) / (1 + sum exp(z_j)), z = bias + weights . x, declining scoring 0.
    The likelihood is of the right choice: any right candidate, else declining. `c` is the
    inverse strength of an L2 penalty, as scikit-learn's C."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp

    width = len(groups[0][1][0][0]) if groups[0][1] else len(selection.FEATURES) - 1
    prepared = [
        (np.array([x for x, _ in rows]).reshape(-1, width), np.array([y for _, y in rows], bool))
        for _, rows in groups
    ]

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        bias, weights = theta[0], theta[1:]
        total, grad = 0.0, np.zeros_like(theta)
        for x, y in prepared:
            z = np.concatenate([[0.0], bias + x @ weights])  # declining first
            norm = logsumexp(z)
            p = np.exp(z - norm)
            wanted = np.concatenate([[not y.any()], y])
            total -= logsumexp(z[wanted]) - norm
            q = np.where(wanted, np.exp(z - logsumexp(z[wanted])), 0.0)
            diff = (p - q)[1:]  # d(-log L)/dz for the candidates
            grad[0] += diff.sum()
            grad[1:] += x.T @ diff
        penalty = 0.5 / c * float(weights @ weights)
        grad[1:] += weights / c
        return total + penalty, grad

    found = minimize(loss, np.zeros(width + 1), jac=True, method="L-BFGS-B")
    return found.x[1:], float(found.x[0])


def best_threshold(groups, weights, bias) -> tuple[float, float]:
    """The decline threshold the conditional logit implies (0.5: a candidate is chosen when it
    scores above declining), and the development accuracy there."""
    return 0.5, question_accuracy(groups, weights, bias, 0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample-index", type=Path, default=REPO / "var" / "sample-index")
    parser.add_argument(
        "--styles-work", type=Path, help="a folder kept for the styles index (default: a temp one)"
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument("--dry-run", action="store_true", help="report, do not write weights")
    parser.add_argument("--candidates", type=Path, help="candidates' features, kept between runs")
    args = parser.parse_args()
    if args.candidates and args.candidates.exists():
        data = json.loads(args.candidates.read_text())
    else:
        data = asked_questions(args.sample_index, args.styles_work)
        if args.candidates:
            atomic_write_text(args.candidates, json.dumps(data))
    # A question no candidate answers right (unanswerable, or a comparison of two sources
    # that the model's answer must make) is answered right by extraction when it declines.
    groups = [
        (
            any(row["right"] for row in item["rows"]),
            [(logs(r["values"]), r["right"]) for r in item["rows"]],
        )
        for item in data
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
    model = selection.Model(tuple(fitted["weights"]), threshold)
    for item in data:
        rows = item["rows"]
        scored = [(model.probability(r["values"]), r["said"], r["right"]) for r in rows]
        best = max(scored, key=lambda r: r[0], default=None)
        ok = (
            best is not None and best[0] >= threshold and best[2]
            if any(r["right"] for r in rows)
            else best is None or best[0] < threshold
        )
        if not ok:
            misses.append(
                item | {"rows": len(rows), "right": sum(r["right"] for r in rows), "best": best}
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
