"""What a command may write over: the one check every output path passes before work starts.

An output replaces only what mmrag wrote there before (an index, an eval run's prediction
file), an empty directory where a directory is written, or anything with `--force`; and never
one of the command's own inputs, nor a directory holding one, whatever the flags. `eval run
--data gold.json --out gold.json` once replaced a 514 KB dataset with 400 bytes of predictions,
and `--out` an empty directory answered every question before failing on the rename: both are
refused here, in one line, before the first model loads.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mmrag.indexes.errors import InputError


@dataclass(frozen=True)
class Output:
    """What a command writes: a directory or a file, and how to tell one it wrote before."""

    what: str  # as the refusal names it: "an mmrag index"
    directory: bool
    ours: Callable[[Path], bool]  # whether an existing path is one mmrag wrote


def _overlap(path: Path, out: Path) -> str | None:
    """What `out` is to the input `path`: "is" (the same path, or the same file under another
    name), "contains" (a directory above it), or None."""
    if path.resolve() == out.resolve():
        return "is"
    if path.resolve().is_relative_to(out.resolve()):
        return "contains"
    try:
        return "is" if os.path.samefile(path, out) else None  # a hard link, a bind mount
    except OSError:  # either one missing
        return None


def check_output_path(
    out: Path,
    output: Output,
    inputs: Sequence[tuple[str, Path]],
    *,
    force: bool = False,
    option: str = "--out",
) -> None:
    """Refuse `out` (named as `option`) if writing it could destroy something not ours.

    `inputs` are the command's (option, path) pairs: `out` may be none of them nor contain
    one, with or without `force`. A file output is never written over a directory (the final
    rename would fail after all the work); a directory output replaces an empty directory."""
    noun = "directory" if output.directory else "file"
    for name, path in inputs:
        if relation := _overlap(path, out):
            raise InputError(
                f"{option} {out} {relation} the input {name} {path}; choose another {noun}"
            )
    if not os.path.lexists(out):
        return
    if not output.directory and out.is_dir():
        raise InputError(f"{option} {out} is a directory; name the file to write")
    if force or output.ours(out):
        return
    if output.directory and out.is_dir() and not any(out.iterdir()):
        return
    found = "a directory that is not" if out.is_dir() else "a file, not"
    raise InputError(
        f"{option} {out} is {found} {output.what}; refusing to replace it (--force to overwrite it)"
    )
