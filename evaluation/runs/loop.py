"""The question loop both runs share: skip what the checkpoint has, record the rest in order.

Questions run one at a time and in file order, so a run is deterministic given its models and
an interruption loses at most the question in flight.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from mmrag.evaluation.runs.checkpoint import Checkpoint

T = TypeVar("T")


def progress_bar(total: int, initial: int, desc: str) -> Any:
    """tqdm on stderr, off when stderr is not a terminal (logs and CI stay clean)."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        desc=desc,
        unit="q",
        file=sys.stderr,
        disable=not sys.stderr.isatty(),
        dynamic_ncols=True,
    )


def run_items(
    items: Sequence[T],
    key: Callable[[T], str],
    work: Callable[[T], dict[str, Any]],
    checkpoint: Checkpoint,
    *,
    desc: str,
) -> int:
    """Run `work` on every item the checkpoint lacks; returns how many ran in this process."""
    todo = [item for item in items if key(item) not in checkpoint.records]
    bar = progress_bar(len(items), len(items) - len(todo), desc)
    ran = 0
    try:
        for item in todo:
            checkpoint.append(key(item), work(item))
            ran += 1
            bar.update()
    except KeyboardInterrupt:
        saved = len(items) - len(todo) + ran
        if checkpoint.path.exists():
            print(
                f"mmrag: {saved} of {len(items)} questions saved in {checkpoint.path}; "
                "rerun with --resume to continue",
                file=sys.stderr,
            )
        raise
    finally:
        bar.close()
        checkpoint.close()
    return ran
