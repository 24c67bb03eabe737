"""Fit the weights and the decline threshold of answer selection (`verification.selection`).

    python -m bench.fit_selection --out docs/bench/fit-selection.json

Every question of the development sets is asked of its index as the pipeline asks it: its
retrieved sources, the selected ones and the runners-up, are the pool, and every statement of
the pool is a candidate with its `features`. A candidate is right when its source is one of
the question's gold sources and it states every gold fact (a yes/no question's: gives the gold
verdict, or gives none and states the facts; a choice's: picks the option its gold answer
picks, not the one compared with). The model is a conditional logit over the features
(log-scaled, as `selection.Model` reads them), fitted on each question's choice among its
candidates and declining, so a question is declined where no candidate scores above
declining; its regularisation and the weight of declining are chosen by the question-level
accuracy on each world of questions when the fit has not seen it (the sample's, and each
world of the styles corpus), averaged.
`--candidates FILE` keeps the candidates' features, for refitting without asking.

Development sets (never the held-out ones):
- the sample corpus: `bench/data/grounding_questions.json` (open questions written for it),
  WebQA_sample.json's questions (its gold sources, the facts of its answers), and
  `data/sample/unanswerable.json`;
- `bench/data/styles/`: the development half of the corpus written in other styles (three
  worlds: Tavistead/Caddowmouth, Orlingham, Brackwater), indexed alone as `bench/styles.py` does.
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
    world: str = "sample"  # the invented world it is about, held out as one in the folds


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
            world=i["world"],
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
        if found is not None:
            return gold[0] in (None, f"{found},", found)
    if question.kind == "choice" and asked.answer:
        gold = selection.picked(question, asked.answer)
        return gold is not None and selection.picked(question, statement.text) == gold
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
        if not selection.eligible(question, statement):
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
                "world": one.world,
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


@dataclass(frozen=True)
class Stacked:
    """Every candidate of the questions that have any, as one array: `starts[g]` is where
    question g's rows begin; `right[g]` whether it has a right candidate."""

    x: np.ndarray
    y: np.ndarray
    starts: np.ndarray
    group: np.ndarray
    right: np.ndarray
    empty: int  # questions with no candidate at all: right when they need none
    empty_right: int  # of those, the ones that needed one (always missed)


def stacked(groups) -> Stacked:
    kept = [(answerable, rows) for answerable, rows in groups if rows]
    x = np.array([x for _, rows in kept for x, _ in rows], dtype=float)
    y = np.array([label for _, rows in kept for _, label in rows], dtype=bool)
    sizes = np.array([len(rows) for _, rows in kept])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    group = np.repeat(np.arange(len(kept)), sizes)
    right = np.array([any(label for _, label in rows) for _, rows in kept])
    empty_right = sum(answerable for answerable, rows in groups if not rows)
    return Stacked(x, y, starts, group, right, len(groups) - len(kept), empty_right)


def question_accuracy(data: Stacked, weights: np.ndarray, bias: float, threshold: float) -> float:
    """The mean of two shares, as the issue's targets weigh them: questions with a right
    candidate answered with it (over the threshold), and questions without one (unanswerable
    here) declined, none of their candidates over it."""
    z = bias + data.x @ weights
    order = np.lexsort((-z, data.group))  # by question, best first
    first = order[data.starts]
    chosen = 1 / (1 + np.exp(-z[first])) >= threshold
    answered = (chosen & data.y[first])[data.right].sum() / max(1, data.right.sum())
    declined = ((~chosen)[~data.right].sum() + data.empty - data.empty_right) / max(
        1, (~data.right).sum() + data.empty - data.empty_right
    )
    return float(answered + declined) / 2


def fit(data: Stacked, c: float, decline: float = 1.0) -> tuple[np.ndarray, float]:
    """Weights and bias of a conditional logit over each question's candidates and declining:
    P(candidate) = exp(z) / (1 + sum exp(z_j)), z = bias + weights . x, declining scoring 0.
    The likelihood is of the right choice: any right candidate, else declining, the latter's
    questions weighing `decline` each. `c` is the inverse strength of an L2 penalty, as
    scikit-learn's C."""
    from scipy.optimize import minimize

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        bias, weights = theta[0], theta[1:]
        z = bias + data.x @ weights
        top = np.maximum(np.maximum.reduceat(z, data.starts), 0.0)
        e = np.exp(z - top[data.group])
        norm = top + np.log(np.add.reduceat(e, data.starts) + np.exp(-top))
        chosen = e * data.y
        wanted_sum = np.maximum(np.add.reduceat(chosen, data.starts), 1e-300)
        wanted = np.where(data.right, top + np.log(wanted_sum), 0.0)
        p = np.exp(z - norm[data.group])
        q = np.where(data.right[data.group], chosen / wanted_sum[data.group], 0.0)
        weight = np.where(data.right, 1.0, decline)
        diff = (p - q) * weight[data.group]
        grad = np.concatenate([[diff.sum()], data.x.T @ diff + weights / c])
        return float((weight * (norm - wanted)).sum() + 0.5 / c * weights @ weights), grad

    found = minimize(loss, np.zeros(data.x.shape[1] + 1), jac=True, method="L-BFGS-B")
    return found.x[1:], float(found.x[0])


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
    threshold = 0.5  # chosen where a candidate scores above declining
    # One world held out at a time: folds of questions drawn from the worlds the fit sees
    # said 0.84 where a world it had not seen said 0.59, as the held-out half did; what is
    # chosen here is what carries to text written elsewhere.
    worlds = [item.get("world", item["corpus"]) for item in data]
    scores = {}
    for c in (0.1, 0.3, 1.0, 3.0, 10.0, 30.0):
        for decline in (1.0, 2.0, 3.0, 4.0, 6.0, 8.0):
            accuracies = []
            for world in sorted(set(worlds)):
                train = stacked([g for g, w in zip(groups, worlds, strict=True) if w != world])
                test = stacked([g for g, w in zip(groups, worlds, strict=True) if w == world])
                weights, bias = fit(train, c, decline)
                accuracies.append(question_accuracy(test, weights, bias, threshold))
            scores[f"C={c} decline={decline}"] = (float(np.mean(accuracies)), c, decline)
    _, c, decline = max(scores.values(), key=lambda k: (k[0], -k[1], -k[2]))
    every = stacked(groups)
    weights, bias = fit(every, c, decline)
    accuracy = question_accuracy(every, weights, bias, threshold)
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
        "world_held_out": {key: round(value[0], 4) for key, value in scores.items()},
        "c": c,
        "decline_weight": decline,
        "development_balanced_accuracy": round(accuracy, 3),
        "fitted": fitted,
        "misses": misses,
    }
    write_report(report, args.out)


if __name__ == "__main__":
    main()
