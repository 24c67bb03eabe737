"""The index manifest: written last, so its presence means every file it lists is complete.

It records what a reader must agree with before trusting the files (format version, tokenizer,
BM25 parameters, encoders) and each file's size and XXH3-128 digest. Every load checks every
listed file: a flipped byte in a faiss file would otherwise load and then fail each search, and
one in the records or BM25 matrix would be served silently. XXH3 (not a cryptographic hash: it
guards against corruption, not tampering) runs at memory speed: 11 GB/s over an index's files in
the page cache here, where SHA-256 manages 1.5 GB/s (docs/BENCHMARKS.md, bench/verify.py).
"""

from __future__ import annotations

import json
import mmap
from pathlib import Path
from typing import Any

import xxhash

from mmrag.indexes.atomic import atomic_write_text, recover
from mmrag.indexes.errors import IndexFormatError

MANIFEST_NAME = "manifest.json"
INDEX_FORMAT = "mmrag-index"
FORMAT_VERSION = 2  # 2: XXH3-128 digests, checked at every load; calibration listed
# Written into a built index later, by `mmrag retrieval calibrate`, and listed then.
CALIBRATION_FILE = "calibration.json"
REBUILD = "rebuild the index"
RECALIBRATE = "rerun `mmrag retrieval calibrate`"


def file_digest(path: Path) -> dict[str, Any]:
    """Size and XXH3-128 of a file, hashed from a memory map (no copy through Python)."""
    with path.open("rb") as handle:
        size = path.stat().st_size
        if size == 0:
            return {"bytes": 0, "xxh3_128": xxhash.xxh3_128_hexdigest(b"")}
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return {"bytes": size, "xxh3_128": xxhash.xxh3_128_hexdigest(data)}


def describe_files(root: Path, folder: str) -> dict[str, dict[str, Any]]:
    """Size and checksum of every file under root/folder, keyed by path relative to root."""
    return {
        path.relative_to(root).as_posix(): file_digest(path)
        for path in sorted((root / folder).rglob("*"))
        if path.is_file()
    }


def write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    body = {**manifest, "format": INDEX_FORMAT, "format_version": FORMAT_VERSION}
    atomic_write_text(root / MANIFEST_NAME, json.dumps(body, indent=2, sort_keys=True) + "\n")


def is_index(root: Path) -> bool:
    """Whether `root` holds an mmrag index of any version: what `index build` may replace."""
    try:
        manifest = json.loads((root / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == INDEX_FORMAT


def read_manifest(root: Path) -> dict[str, Any]:
    """Refuse, with the reason, anything that is not a complete index this version can read.

    An index left missing by a build killed mid-swap is first put back (`recover`).
    """
    recover(root)
    path = root / MANIFEST_NAME
    if not root.is_dir():
        raise IndexFormatError(
            f"{root}: no such index directory (build one with `mmrag index build`)"
        )
    if not path.is_file():
        raise IndexFormatError(
            f"{root}: not an mmrag index (no {MANIFEST_NAME}; incomplete build?)"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IndexFormatError(f"{path}: unreadable manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != INDEX_FORMAT:
        raise IndexFormatError(f"{path}: not an mmrag index manifest")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise IndexFormatError(
            f"{root}: index format version {version}, this mmrag reads version {FORMAT_VERSION}; "
            "rebuild it with `mmrag index build`"
        )
    return manifest


def check_files(
    root: Path, files: dict[str, dict[str, Any]], *, checksums: bool = True, remedy: str = REBUILD
) -> None:
    """Sizes (cheap, catches truncation), then digests unless `checksums` is off."""
    for name, expected in files.items():
        path = root / name
        if not path.is_file():
            raise IndexFormatError(f"{root}: missing index file {name}; {remedy}")
        if path.stat().st_size != expected["bytes"]:
            raise IndexFormatError(
                f"{root}: {name} has the wrong size (corrupt or truncated); {remedy}"
            )
        if checksums and file_digest(path)["xxh3_128"] != expected["xxh3_128"]:
            raise IndexFormatError(f"{root}: {name} fails its checksum (corrupt); {remedy}")


def check_calibration(root: Path, manifest: dict[str, Any], *, checksums: bool = True) -> None:
    """A calibration must be listed with its digest: an unlisted one is not trusted either."""
    listed = manifest.get("calibration")
    if listed:
        check_files(root, listed["files"], checksums=checksums, remedy=RECALIBRATE)
    elif (root / CALIBRATION_FILE).exists():
        raise IndexFormatError(
            f"{root}: {CALIBRATION_FILE} is not in the manifest (interrupted calibration?); "
            f"{RECALIBRATE}"
        )


def check_index_files(root: Path, manifest: dict[str, Any], *, checksums: bool = True) -> None:
    """Every file the manifest lists (sources, every component, calibration); the first that
    fails is named in one line with what to do about it."""
    check_files(root, manifest["store"]["files"], checksums=checksums)
    for component in manifest.get("components", {}).values():
        check_files(root, component["files"], checksums=checksums)
    check_calibration(root, manifest, checksums=checksums)


def record_calibration(root: Path) -> None:
    """List the calibration just written into the index, rewriting the manifest atomically."""
    manifest = read_manifest(root)
    manifest["calibration"] = {"files": {CALIBRATION_FILE: file_digest(root / CALIBRATION_FILE)}}
    write_manifest(root, manifest)


def discard_unverified_calibration(root: Path) -> str | None:
    """Delete a calibration the manifest does not vouch for; return why, or None.

    Only recalibration calls this: it replaces the calibration anyway, and a run interrupted
    between writing the file and the manifest must not lock the index out of the one command
    that repairs it. A calibration that checks out is kept until the new one is written.
    """
    manifest = read_manifest(root)
    try:
        check_calibration(root, manifest)
    except IndexFormatError as exc:
        if manifest.pop("calibration", None):
            write_manifest(root, manifest)
        (root / CALIBRATION_FILE).unlink(missing_ok=True)
        return str(exc)
    return None
