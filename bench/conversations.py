"""Follow-ups with and without the conversation: how often the answer comes from the right source.

    python -m bench.conversations --index var/sample-index --out docs/bench/conversations.json
    python -m bench.conversations --conversations bench/data/conversations_open.json --no-alone \
        --out docs/bench/conversations-open.json

`data/sample/conversations.json` holds multi-turn conversations over the sample corpus
(follow-ups about colours, counts, names and a photo, and changes of topic), each turn with the
sources that answer it; `bench/data/conversations_open.json` holds 65 more written for the
resolver, half opening the way people open ("Tell me about", "Describe", "Please", "I'm
looking at", "Thanks!"), with follow-ups whose topic only the assistant named (its answer is
given with the turn) and changes of topic, each turn marked `opening`, `follow-up` or
`topic-change`. Every turn is asked through `QAPipeline.answer` with the service's defaults:
with the turns before it (as the chat page, `mmrag chat` and the OpenAI route ask it; a photo
stays attached for the rest of its conversation), and, unless --no-alone, alone. A turn is
answered from the right source when the answer cites one of its sources; "selected" counts a
right source among those the answer was written from; a change of topic is left untouched when
the resolved question is the question as asked. Seconds are the whole answer's, and the
resolver's own.
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

from bench.report import machine, write_report  # noqa: E402
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


def run(
    pipeline: QAPipeline, settings: Settings, conversations: list[dict], *, alone_too: bool = True
) -> dict:
    attacher = build_attacher(settings)
    turns_out = []
    for conversation in conversations:
        photo = None
        if "image" in conversation:
            photo = attacher.attach(sign_jpeg(*conversation["image"].split("|")))
        history: list[Turn] = []
        for number, turn in enumerate(conversation["turns"]):
            question, gold = turn["question"], turn["gold"]
            kind = turn.get("kind", "follow-up" if number else "opening")
            with_history, seconds = ask(pipeline, question, image=photo, conversation=history)
            said = turn.get("assistant") or with_history.answer.text  # the script's, if given
            history += [Turn("user", question), Turn("assistant", said)]
            cited, selected = right(with_history, gold)
            row = {
                "conversation": conversation["id"],
                "question": question,
                "kind": kind,
                "resolved": with_history.question,
                "untouched": with_history.question == question,
                "follow_up": kind == "follow-up",
                "answer": with_history.answer.text,
                "cited": cited,
                "selected": selected,
                "seconds": round(seconds, 3),
                "resolve_s": round(with_history.timings.resolve_s, 5),
            }
            if alone_too:
                alone, alone_seconds = ask(pipeline, question, image=photo if number == 0 else None)
                cited_alone, selected_alone = right(alone, gold)
                row |= {
                    "answer_alone": alone.answer.text,
                    "cited_alone": cited_alone,
                    "selected_alone": selected_alone,
                    "seconds_alone": round(alone_seconds, 3),
                }
            turns_out.append(row)
    return {"summary": summary(turns_out), "turns": turns_out}


def summary(turns: list[dict]) -> dict:
    def share(rows: list[dict], key: str) -> float:
        return round(sum(row[key] for row in rows) / len(rows), 3) if rows else float("nan")

    groups = {
        "all turns": turns,
        "follow-ups": [t for t in turns if t["follow_up"]],
        "topic changes": [t for t in turns if t["kind"] == "topic-change"],
    }
    keys = ["cited", "selected", "cited_alone", "selected_alone", "untouched"]
    table = {
        name: {"n": len(rows)} | {key: share(rows, key) for key in keys if key in turns[0]}
        for name, rows in groups.items()
        if rows
    }
    follow_ups = groups["follow-ups"]
    table["latency_ms"] = {
        "answer_p50_with_history": round(1000 * statistics.median(t["seconds"] for t in turns), 1),
        "resolve_p50": round(1000 * statistics.median(t["resolve_s"] for t in follow_ups), 3),
        "resolve_max": round(1000 * max(t["resolve_s"] for t in follow_ups), 3),
    }
    if "seconds_alone" in turns[0]:
        alone = statistics.median(t["seconds_alone"] for t in turns)
        table["latency_ms"]["answer_p50_alone"] = round(1000 * alone, 1)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, default=REPO / "var" / "sample-index")
    parser.add_argument("--conversations", type=Path, default=CONVERSATIONS)
    parser.add_argument("--rewrite", choices=("rules", "llm"), default="rules")
    parser.add_argument(
        "--alone",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also ask each turn without the conversation (twice the time)",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    settings = Settings.load(None, index=args.index, rewrite=args.rewrite)
    pipeline = build_pipeline(settings)
    conversations = json.loads(args.conversations.read_text())["conversations"]
    results = {"command": " ".join(sys.argv), "rewrite": args.rewrite, "machine": machine()}
    results |= run(pipeline, settings, conversations, alone_too=args.alone)
    write_report(results, args.out)


if __name__ == "__main__":
    main()
