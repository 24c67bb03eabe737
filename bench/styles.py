"""Answers on text written in other styles (issue 38): right, cited, declined when they should be?

    python -m bench.styles --half heldout --out docs/bench/styles-heldout.json
    python -m bench.styles --check

`bench/data/styles/` holds a corpus written for this outside the sample (news reports with a
dateline, museum labels, travel blogs, product manuals, recipes, timetables, interview quotes,
list pages, photo captions; pronoun-led and verbless sentences, instructions, hedged, former,
compared and negated facts, near-duplicate pages) and questions about it, split into a `dev`
half to tune on and a `heldout` half to report, by topic: no question of one half is about a
source of the other (see the `about` of questions.json). Each half is indexed alone, through
`mmrag index build` with its defaults (BM25 + the packaged MiniLM, no calibration, as a new user
builds one), its photos drawn as small PNGs beside it; every question is asked once through
`QAPipeline.answer` with the service's defaults, and judged by fixed rules that do not change
with the answering code:

- right: an answerable question answered (not declined), citing a source that holds its facts,
  and stating every fact (words by their Snowball stem, numbers normalised: "06:50" is "6:50",
  "twelve" is "12", "1,900" is "1900"), with no invented word; a yes/no answer that opens
  with "yes" or "no" opens with the expected one;
- declined: an unanswerable question answered with the decline;
- invented: a cited answer with a content word no cited source holds (`bench.grounding`'s rule);
- sentence: the answer is one sentence with a finite verb.

Each half is reported whole and by style, question kind and sentence shape, with every miss:
the question, the facts expected, the answer, its attribution, the ids it cites, and where the
right sources were (given to the writer, or only retrieved).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.grounding import judge, share  # noqa: E402
from bench.report import machine, write_report  # noqa: E402

DATA = REPO / "bench" / "data" / "styles"
CORPUS = DATA / "corpus.jsonl"
QUESTIONS = DATA / "questions.json"
HALVES = ("dev", "heldout")
STYLES = ("news", "label", "blog", "manual", "recipe", "timetable", "interview", "list", "caption")
KINDS = ("factoid", "quantity", "yes/no", "choice", "open")
MISSES = (
    *("declined", "wrong source", "wrong verdict", "fact missing", "invented word"),
    "unanswerable answered",
)
MISS_FIELDS = (
    *("half", "id", "style", "question", "miss", "facts", "missing_facts", "answer"),
    *("attribution", "cited_ids", "invented", "sources", "right_source_given", "right_source_rank"),
    "error",
)

UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
TEENS = ["eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen"]
TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
NUMBER_WORDS = {word: value for value, word in enumerate(UNITS + TEENS + ["nineteen"])} | {
    word: 10 * tens for tens, word in enumerate(TENS, 2)
}
TOKEN = re.compile(r"\d+(?:[.:]\d+)*|[a-z]+(?:'[a-z]+)?|[£$€%°&]")


@cache
def _stem() -> Callable[[str], str]:
    import Stemmer  # PyStemmer: the Snowball stemmer bm25s uses

    return Stemmer.Stemmer("english").stemWord


def tokens(text: str) -> list[str]:
    """Word stems and numbers, a number however it is written: "thirty-one" and "31",
    "06:50" and "6:50", "1,900" and "1900" give the same token, and so do "fry" and "fried"."""
    text = text.lower().replace("\u2019", "'").replace("\u2013", "-").replace("\u2014", "-")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    out: list[str] = []
    tens = False
    for word in TOKEN.findall(text):
        value = NUMBER_WORDS.get(word)
        if value is not None and tens and value < 10:  # "thirty-one", "forty two"
            out[-1] = str(int(out[-1]) + value)
            tens = False
            continue
        if value is not None:
            word = str(value)
        elif word[0].isdigit():
            word = re.sub(r"^0+(?=\d)", "", word)  # "06:50" is "6:50"
        else:
            word = _stem()(word)
        tens = value is not None and value >= 20
        out.append(word)
    return out


def states(fact: str, text: str) -> bool:
    """Whether `text` says `fact`: its tokens, in order, next to each other."""
    want, said = tokens(fact), tokens(text)
    starts = range(len(said) - len(want) + 1)
    return any(said[start : start + len(want)] == want for start in starts)


def verdict(text: str) -> str | None:
    """The "yes" or "no" an answer opens with, if it opens with one."""
    first = tokens(text)[:1]
    return first[0] if first and first[0] in ("yes", "no") else None


def load(half: str = "both") -> tuple[list[dict], list[dict]]:
    """The sources and questions of one half (or both), checked."""
    sources = [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]
    questions = json.loads(QUESTIONS.read_text())["questions"]
    problems = check(sources, questions)
    if problems:
        raise SystemExit("bench/data/styles is inconsistent:\n  " + "\n  ".join(problems))
    halves = HALVES if half == "both" else (half,)
    return (
        [source for source in sources if source["half"] in halves],
        [question for question in questions if question["half"] in halves],
    )


def check(sources: list[dict], questions: list[dict]) -> list[str]:
    """What is wrong with the data: a fact its listed sources do not state, a source of the
    other half, an unanswerable question with facts or whose `absent` words its group holds,
    a group whose questions are not of one world, a half without every style or with fewer
    than 12 unanswerable questions."""
    problems = []
    by_id = {source["id"]: source for source in sources}
    if len(by_id) != len(sources):
        problems.append("duplicate source ids")
    ids = [question["id"] for question in questions]
    if len(set(ids)) != len(ids):
        problems.append("duplicate question ids")
    groups: dict[str, list[dict]] = defaultdict(list)
    for source in sources:
        groups[source["group"]].append(source)
    for group, members in groups.items():
        if len({source["half"] for source in members}) > 1:
            problems.append(f"group {group} is in both halves")
    worlds: dict[str, set] = defaultdict(set)
    for question in questions:
        name = question["id"]
        worlds[question["group"]].add(question.get("world"))
        if question["answerable"] != bool(question["sources"]) or (
            question["answerable"] != bool(question["facts"])
        ):
            problems.append(f"{name}: answerable questions need sources and facts, others none")
        if question["half"] not in {source["half"] for source in groups.get(question["group"], [])}:
            problems.append(f"{name}: group {question['group']} is not of its half")
        for source_id in question["sources"]:
            source = by_id.get(source_id)
            if source is None or source["half"] != question["half"]:
                problems.append(f"{name}: source {source_id} is missing or of the other half")
                continue
            text = f"{source['title']}. {source['text']}"
            for fact in question["facts"]:
                if fact.lower() not in text.lower() or not states(fact, text):
                    problems.append(f"{name}: {fact!r} is not in {source_id}")
        if question.get("verdict") not in (None, "yes", "no"):
            problems.append(f"{name}: verdict must be yes or no")
        for word in question.get("absent", []):
            for source in groups.get(question["group"], []):
                if word.lower() in f"{source['title']}. {source['text']}".lower():
                    problems.append(f"{name}: {word!r}, said to be absent, is in {source['id']}")
    for group, found in worlds.items():
        if len(found) != 1 or None in found:
            problems.append(f"group {group}: its questions need one world")
    for half in HALVES:
        asked = [question for question in questions if question["half"] == half]
        missing = set(STYLES) - {question["style"] for question in asked}
        if missing:
            problems.append(f"{half}: no question in style {sorted(missing)}")
        if sum(not question["answerable"] for question in asked) < 12:
            problems.append(f"{half}: fewer than 12 unanswerable questions")
    return problems


def draw_photo(path: Path, seed: str) -> None:
    """A small PNG standing for a photo: the embedded engine reads its caption, not its pixels."""
    from PIL import Image, ImageDraw

    hue = sum(seed.encode()) % 255
    image = Image.new("RGB", (96, 64), (hue, 160, 255 - hue))
    ImageDraw.Draw(image).rectangle((16, 24, 80, 56), fill=(255 - hue, hue, 120))
    image.save(path)


def build_index(sources: list[dict], folder: Path) -> Path:
    """The half's corpus and photos written to `folder`, indexed there by `mmrag index build`."""
    from mmrag.service.cli import main as mmrag

    corpus = folder / "corpus" / "corpus.jsonl"
    (corpus.parent / "images").mkdir(parents=True)
    lines = []
    for source in sources:
        if source["modality"] == "image":
            draw_photo(corpus.parent / source["image"], source["id"])
        lines.append(json.dumps(source, ensure_ascii=False))
    corpus.write_text("\n".join(lines) + "\n")
    index = folder / "index"
    if mmrag(["index", "build", "--corpus", str(corpus), "--out", str(index), "--quiet"]):
        raise SystemExit(f"mmrag index build failed on {corpus}")
    return index


def judged(item: dict, result) -> dict:
    """`bench.grounding.judge`'s row, with this benchmark's verdict on it."""
    row = judge(item, result)
    answer = result.answer
    plain = answer.text_without_markers
    wanted = set(item["sources"])
    given = [source.id for source in answer.sources]
    retrieved = [scored.source.id for scored in result.selection.considered]
    missing = [fact for fact in item["facts"] if not states(fact, plain)]
    said = verdict(plain)
    wrong_verdict = item.get("verdict") is not None and said not in (None, item["verdict"])
    right_source = bool(set(row["cited_ids"]) & wanted)
    answered = row["cited"] and not row["declined"]
    flawed = missing or wrong_verdict or row["invented"]
    row |= {
        "style": item["style"],
        "kind": item["kind"],
        "shape": item["shape"],
        "casual": item.get("casual", False),
        "facts": item["facts"],
        "sources": item["sources"],
        "missing_facts": missing,
        "verdict": said,
        "error": answer.generation_error,
        "right": bool(item["answerable"] and answered and right_source and not flawed),
        "right_source_given": bool(set(given) & wanted),
        "right_source_rank": next((n for n, id in enumerate(retrieved, 1) if id in wanted), None),
    }
    if row["answerable"] and not row["right"]:
        reasons = {
            "declined": not answered,
            "wrong source": not right_source,
            "wrong verdict": wrong_verdict,
            "fact missing": bool(missing),
            "invented word": True,
        }
        row["miss"] = next(reason for reason, applies in reasons.items() if applies)
    elif not row["answerable"] and not row["declined"]:
        row["miss"] = "unanswerable answered"
    return row


def figures(rows: list[dict], seconds: list[float]) -> dict:
    answerable = [row for row in rows if row["answerable"]]
    unanswerable = [row for row in rows if not row["answerable"]]
    cited = [row for row in rows if row["cited"]]
    return {
        "questions": len(rows),
        "answerable": len(answerable),
        "right_and_cited": share(answerable, "right"),
        "right_and_cited_n": sum(row["right"] for row in answerable),
        "unanswerable": len(unanswerable),
        "unanswerable_declined": share(unanswerable, "declined"),
        "unanswerable_declined_n": sum(row["declined"] for row in unanswerable),
        "cited_answers": len(cited),
        "cited_with_an_invented_word": share(cited, "invented"),
        "full_sentences": share(rows, "sentence"),
        "answer_p50_s": round(statistics.median(seconds), 2) if seconds else None,
    }


def report(rows: list[dict], seconds: dict[str, float]) -> dict:
    """Figures for the rows whole, by style, by kind and by sentence shape."""

    def of(selected: list[dict]) -> dict:
        return figures(selected, [seconds[row["id"]] for row in selected])

    shapes = sorted({shape for row in rows for shape in row["shape"]})
    return {
        "all": of(rows),
        "by_style": {s: of([r for r in rows if r["style"] == s]) for s in STYLES},
        "by_kind": {k: of([r for r in rows if r["answerable"] and r["kind"] == k]) for k in KINDS},
        "by_shape": {s: of([r for r in rows if s in r["shape"]]) for s in shapes},
        "casual": of([r for r in rows if r["casual"]]),
        "misses_by_reason": {
            reason: sum(row.get("miss") == reason for row in rows) for reason in MISSES
        },
        "false_declines_with_a_right_source_given": sum(
            row.get("miss") == "declined" and row["right_source_given"] for row in rows
        ),
    }


def run_half(half: str, work: Path) -> tuple[dict, list[dict]]:
    """One half indexed alone and every one of its questions asked once."""
    from mmrag.core.components import build_pipeline
    from mmrag.core.settings import Settings

    sources, questions = load(half)
    started = time.perf_counter()
    index = build_index(sources, work / half)
    built = time.perf_counter() - started
    pipeline = build_pipeline(Settings.load(None, index=index))
    rows, seconds = [], {}
    for number, item in enumerate(questions, 1):
        began = time.perf_counter()
        result = pipeline.answer(item["question"], timeout_s=120)
        seconds[item["id"]] = time.perf_counter() - began
        rows.append(judged(item, result) | {"half": half})
        print(f"{half} {number}/{len(questions)} {item['id']}", file=sys.stderr, flush=True)
    counts = {
        "sources": len(sources),
        "sources_by_style": {s: sum(src["style"] == s for src in sources) for s in STYLES},
        "index_build_s": round(built, 1),
    }
    return report(rows, seconds) | counts, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=(*HALVES, "both"), default="dev")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--work", type=Path, help="folder for each half's corpus and index (default: a temp one)"
    )
    parser.add_argument("--check", action="store_true", help="check the data, answer nothing")
    args = parser.parse_args()
    if args.check:
        sources, questions = load()
        print(f"bench/data/styles: {len(sources)} sources, {len(questions)} questions, consistent")
        return
    halves = HALVES if args.half == "both" else (args.half,)
    machine_at_start = machine()
    with tempfile.TemporaryDirectory(dir=args.work, prefix="bench-styles-") as work:
        results, every_row = {}, []
        for half in halves:
            results[half], rows = run_half(half, Path(work))
            every_row += rows
    misses = [{key: row[key] for key in MISS_FIELDS} for row in every_row if "miss" in row]
    write_report(
        {
            "command": " ".join(sys.argv),
            "machine": machine_at_start | {"load_average_1m_at_end": round(os.getloadavg()[0], 2)},
            "halves": results,
            "misses": misses,
            "answers": every_row,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
