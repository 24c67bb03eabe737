"""Image bytes by reference: WebQA's imgs.tsv (seeked via imgs.lineidx) or a directory of files.

imgs.tsv is about 51 GB, so it is never read whole: imgs.lineidx gives each line's byte offset,
and an image's line is `lineidx[image_id % 10_000_000]`. Some WebQA JPEGs are truncated, so
decoding tolerates truncation rather than dropping the image.
"""

from __future__ import annotations

import base64
import binascii
import io
import threading
from pathlib import Path
from typing import Protocol

import numpy as np
from PIL import Image, ImageFile

from indexes.errors import InputError

ImageFile.LOAD_TRUNCATED_IMAGES = True

WEBQA_ID_MODULUS = 10_000_000


class ImageNotFound(InputError):
    """The reference names no image in this store."""


class ImageStore(Protocol):
    def read_bytes(self, image_ref: str) -> bytes: ...


def decode_image(data: bytes) -> Image.Image:
    """Decode to RGB; truncated files decode as far as their bytes go."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.convert("RGB")
    except (OSError, Image.DecompressionBombError) as exc:
        raise InputError(f"undecodable image ({exc})") from None


def image_media_type(data: bytes) -> str:
    """The MIME type from the magic bytes, for serving the stored bytes untouched."""
    signatures = {
        b"\xff\xd8": "image/jpeg",
        b"\x89PNG": "image/png",
        b"GIF8": "image/gif",
        b"RIFF": "image/webp",
    }
    for magic, media_type in signatures.items():
        if data.startswith(magic):
            return media_type
    return "application/octet-stream"


def read_lineidx(path: str | Path) -> np.ndarray:
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file (imgs.lineidx sits beside imgs.tsv)") from None
    try:
        return np.array(raw.split(), dtype=np.int64)
    except ValueError:
        raise InputError(f"{path}: not a line index (one integer byte offset per line)") from None


class WebQAImageStore:
    """Random access into imgs.tsv; one shared file handle guarded by a lock."""

    def __init__(self, tsv_path: str | Path, lineidx_path: str | Path | None = None) -> None:
        self.tsv_path = Path(tsv_path)
        if not self.tsv_path.is_file():
            raise InputError(f"{self.tsv_path}: no such file")
        self.lineidx_path = Path(lineidx_path or self.tsv_path.with_suffix(".lineidx"))
        self.offsets = read_lineidx(self.lineidx_path)
        self._handle = self.tsv_path.open("rb")
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.offsets)

    def read_bytes(self, image_ref: str) -> bytes:
        try:
            image_id = int(image_ref)
        except ValueError:
            raise ImageNotFound(f"image id must be an integer, got {image_ref!r}") from None
        row = image_id % WEBQA_ID_MODULUS
        if not 0 <= row < len(self.offsets):
            raise ImageNotFound(f"image {image_id} is not in {self.tsv_path.name}")
        with self._lock:
            self._handle.seek(int(self.offsets[row]))
            line = self._handle.readline()
        key, _, payload = line.partition(b"\t")
        if key.strip() != str(image_id).encode():
            raise ImageNotFound(f"image {image_id} is not in {self.tsv_path.name}")
        try:
            return base64.b64decode(payload.strip(), validate=True)
        except binascii.Error:
            raise InputError(f"image {image_id}: corrupt base64 in {self.tsv_path.name}") from None

    def close(self) -> None:
        self._handle.close()


class DirectoryImageStore:
    """Images as files under one root; references may not escape it."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def read_bytes(self, image_ref: str) -> bytes:
        path = (self.root / image_ref).resolve()
        if not path.is_relative_to(self.root) or not path.is_file():
            raise ImageNotFound(f"image {image_ref!r} is not in {self.root}")
        return path.read_bytes()
