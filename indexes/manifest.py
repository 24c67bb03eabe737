"""The index manifest: written last, so its presence means every file it lists is complete.

It records what a reader must agree with before trusting the files (format version, tokenizer,
BM25 parameters, encoders in later components) and each file's size and SHA-256.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from indexes.atomic import atomic_write_text
from indexes.errors import IndexFormatError

MANIFEST_NAME = "manifest.json"
INDEX_FORMAT = "mmrag-index"
FORMAT_VERSION = 1


def file_digest(path: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def describe_files(root: Path, folder: str) -> dict[str, dict[str, Any]]:
    """Size and checksum of every file under root/folder, keyed by path relative to root."""
    return {
        path.relative_to(root).as_posix(): file_digest(path)
        for path in sorted((root / folder).rglob("*"))
        if path.is_file()
    }


def write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    body = {"format": INDEX_FORMAT, "format_version": FORMAT_VERSION, **manifest}
    atomic_write_text(root / MANIFEST_NAME, json.dumps(body, indent=2, sort_keys=True) + "\n")


def read_manifest(root: Path) -> dict[str, Any]:
    """Refuse, with the reason, anything that is not a complete index this version can read."""
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


def check_files(root: Path, files: dict[str, dict[str, Any]], *, checksums: bool) -> None:
    """Sizes always (cheap, catches truncation); SHA-256 only when asked (reads every byte)."""
    for name, expected in files.items():
        path = root / name
        if not path.is_file():
            raise IndexFormatError(f"{root}: missing index file {name}")
        if path.stat().st_size != expected["bytes"]:
            raise IndexFormatError(f"{root}: {name} has the wrong size (corrupt or truncated)")
        if checksums and file_digest(path)["sha256"] != expected["sha256"]:
            raise IndexFormatError(f"{root}: {name} fails its checksum (corrupt)")
