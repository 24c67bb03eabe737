"""Follow-ups with and without the conversation: how often the answer comes from the right source.

    python -m bench.conversations --index var/sample-index --out docs/bench/conversations.json

`data/sample/conversations.json` holds multi-turn conversations over the sample corpus
(follow-ups about colours, counts, names and a photo, and changes of topic), each turn with the
sources that answer it. Every turn is asked twice through `QAPipeline.answer`, with the
service's defaults: with the turns before it (as the chat page, `mmrag chat` and the OpenAI
route ask it; a photo stays attached for the rest of its conversation), and alone (each
question by itself, the photo with the turn it came with). A turn is answered from the right
source when the answer cites one of its sources; "selected" counts a right source among those
the answer was written from. Seconds are the whole answer's, and the resolver's own.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import write_report  # noqa: E402
from mmrag.core.components import build_attacher, build_pipeline  # noqa: E402
from mmrag.core.pipeline import QAPipeline, QAResult  # noqa: E402
from mmrag.core.settings import Settings  # noqa: E402
from mmrag.generation.types import Turn  # noqa: E402
from tests.helpers import sign_jpeg  # noqa: E402

CONVERSATIONS = REPO / "data" / "sample" / "conversations.json"


def right(result: QAResult, gold: list[str]) -> tuple[bool, bool]:
    """(cited, selected): a gold source among the answer's citations, among its sources."""

    def wanted(source_id: str) -> bool:
        return source_id in gold or ("upload" in gold and source_id.startswith("upload-"))

    cited = any(wanted(c.source_id) for c in result.answer.citations)
    selected = any(wanted(s.source.id) for s in result.selection.selected)
    return cited, selected


def ask(pipeline: QAPipeline, question: str, **options) -> tuple[QAResult, float]:
    started = time.perf_counter()
    result = pipeline.answer(question, timeout_s=60, **options)
    return result, time.perf_counter() - started


def run(pipeline: QAPipeline, settings: Settings, conversations: list[dict]) -> dict:
    attacher = build_attacher(settings)
    turns_out = []
    for conversation in conversations:
        photo = None
        if "image" in conversation:
            photo = attacher.attach(sign_jpeg(*conversation["image"].split("|")))
        history: list[Turn] = []
        for number, turn in enumerate(conversation["turns"]):
            question, gold = turn["question"], turn["gold"]
            with_history, seconds = ask(pipeline, question, image=photo, conversation=history)
            alone, alone_seconds = ask(pipeline, question, image=photo if number == 0 else None)
            history += [Turn("user", question), Turn("assistant", with_history.answer.text)]
            cited, selected = right(with_history, gold)
            cited_alone, selected_alone = right(alone, gold)
            turns_out.append(
                {
                    "conversation": conversation["id"],
                    "question": question,
                    "resolved": with_history.question,
                    "follow_up": number > 0,
                    "answer": with_history.answer.text,
                    "answer_alone": alone.answer.text,
                    "cited": cited,
                    "selected": selected,
                    "cited_alone": cited_alone,
                    "selected_alone": selected_alone,
                    "seconds": round(seconds, 3),
                    "seconds_alone": round(alone_seconds, 3),
                    "resolve_s": round(with_history.timings.resolve_s, 5),
                }
            )
    return {"summary": summary(turns_out), "turns": turns_out}


def summary(turns: list[dict]) -> dict:
    def share(rows: list[dict], key: str) -> float:
        return round(sum(row[key] for row in rows) / len(rows), 3) if rows else float("nan")

    groups = {"all turns": turns, "follow-ups": [t for t in turns if t["follow_up"]]}
    table = {
        name: {
            "n": len(rows),
            "cited_with_history": share(rows, "cited"),
            "cited_alone": share(rows, "cited_alone"),
            "selected_with_history": share(rows, "selected"),
            "selected_alone": share(rows, "selected_alone"),
        }
        for name, rows in groups.items()
    }
    follow_ups = groups["follow-ups"]
    table["latency_ms"] = {
        "answer_p50_with_history": round(1000 * statistics.median(t["seconds"] for t in turns), 1),
        "answer_p50_alone": round(1000 * statistics.median(t["seconds_alone"] for t in turns), 1),
        "resolve_p50": round(1000 * statistics.median(t["resolve_s"] for t in follow_ups), 3),
        "resolve_max": round(1000 * max(t["resolve_s"] for t in follow_ups), 3),
    }
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, default=REPO / "var" / "sample-index")
    parser.add_argument("--conversations", type=Path, default=CONVERSATIONS)
    parser.add_argument("--rewrite", choices=("rules", "llm"), default="rules")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    settings = Settings.load(None, index=args.index, rewrite=args.rewrite)
    pipeline = build_pipeline(settings)
    conversations = json.loads(args.conversations.read_text())["conversations"]
    results = {"command": " ".join(sys.argv), "rewrite": args.rewrite}
    results |= run(pipeline, settings, conversations)
    write_report(results, args.out)


if __name__ == "__main__":
    main()
