"""Image bytes by reference: WebQA's imgs.tsv (seeked via imgs.lineidx) or a directory of files.

imgs.tsv is about 51 GB, so it is never read whole: imgs.lineidx gives each line's byte offset,
and an image's line is `lineidx[image_id % 10_000_000]`. Some WebQA JPEGs are truncated, so
decoding tolerates truncation rather than dropping the image.

A build probes every image (`probe`): the row's key, its first base64 block and the image
signature there, one short read: 7 us per image from the page cache here, 3 s for WebQA's 390K.
Checking whole rows would read all 51 GB and decode it at about 0.2 GB/s (0.1 ms for a 28 KB
row here: minutes for WebQA, on a build that takes one without CLIP); so corruption deeper in
a row is found where the bytes are used anyway: counted when CLIP decodes every image at
build, answered 422 when served.
"""

from __future__ import annotations

import binascii
import io
import os
import stat
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pybase64
from PIL import Image, ImageFile, ImageOps

from mmrag.indexes.errors import InputError

ImageFile.LOAD_TRUNCATED_IMAGES = True

WEBQA_ID_MODULUS = 10_000_000
# 40 MP: a 50 MP camera's full frame is more than most answers need, and 40M RGB pixels are
# 120 MB decoded; well below Pillow's bomb limit (89M, an error only above twice that).
MAX_IMAGE_PIXELS = 40_000_000
# The formats the service documents; Pillow would open a dozen more (TGA, PCX, SGI, ICNS...),
# each one more parser a hostile upload can reach.
DECODED_FORMATS = ("JPEG", "PNG", "GIF", "BMP", "TIFF", "WEBP")
# A side shorter than this holds no line of text a reader or a model could make out.
MIN_IMAGE_SIDE = 8
# Enough of a row for its key (at most 20 digits), the tab and 64 base64 characters.
PROBE_BYTES = 96
# Where a row's key must end (its tab): 20 digits and some spaces.
KEY_BYTES = 32
# The most of one row read at once: a lineidx that lists fewer rows than imgs.tsv holds would
# otherwise make its last row run to the end of a 51 GB file. 256 MiB of base64 is a 192 MB
# image, far beyond any photo.
MAX_ROW_BYTES = 256 << 20
ROW_WHITESPACE = b" \t\r\n\x0b\x0c"
SIGNATURES = {
    b"\xff\xd8": "image/jpeg",
    b"\x89PNG": "image/png",
    b"GIF8": "image/gif",
    b"BM": "image/bmp",
    b"II*\x00": "image/tiff",
    b"MM\x00*": "image/tiff",
}


UNDECODABLE = "undecodable image: not a JPEG, PNG, GIF, BMP, TIFF or WebP file, or broken"


class ImageNotFound(InputError):
    """The reference names no image in this store."""


class CorruptImage(InputError):
    """The stored bytes of an image are not an image (bad base64, unknown or broken format)."""


class ImageStore(Protocol):
    def read_bytes(self, image_ref: str) -> bytes: ...

    def probe(self, image_ref: str) -> None: ...


def read_image_file(path: Path, max_bytes: int) -> bytes:
    """A user's own image file (`--image`): only a regular file, of at most `max_bytes` (the
    service's upload limit). /dev/zero was read until the kernel killed the process at 23 GB,
    and opening a FIFO waited for a writer forever."""
    where = f"--image {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens without a writer
    except FileNotFoundError:
        raise InputError(f"{where}: no such image file") from None
    except OSError as exc:
        raise InputError(f"{where}: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode  # before fdopen, which refuses a directory naming only its fd
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InputError(
            f"{where}: {'a directory' if stat.S_ISDIR(mode) else 'not a regular file'}"
        )
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputError(f"{where}: larger than the {max_bytes:,} bytes an upload may have")
    return data


def decode_image(data: bytes, max_pixels: int = MAX_IMAGE_PIXELS) -> Image.Image:
    """Decode to RGB; truncated files decode as far as their bytes go.

    The pixel count is read from the header and bounded before anything is decoded: a 20 KB
    PNG can declare 13000 x 13000 pixels, 500 MB once decoded, and still pass Pillow's own
    bomb check (which only errs above twice its 89M-pixel limit).
    """
    try:
        with Image.open(io.BytesIO(data), formats=DECODED_FORMATS) as image:
            width, height = image.size
            if width * height > max_pixels:
                raise CorruptImage(
                    f"image of {width}x{height} pixels is larger than the {max_pixels:,} "
                    "pixels allowed"
                )
            if min(width, height) < MIN_IMAGE_SIDE:
                raise CorruptImage(
                    f"image of {width}x{height} pixels is too thin to read: each side needs "
                    f"at least {MIN_IMAGE_SIDE} pixels"
                )
            # As a phone's photo viewer shows it: upright, whatever way the camera was held.
            return ImageOps.exif_transpose(image).convert("RGB")
    except CorruptImage:
        raise
    except Image.DecompressionBombError as exc:
        raise CorruptImage(f"image too large to decode ({exc})") from None
    except Exception:
        # Whatever a decoder raises on bytes that do not hold what their header says:
        # OSError (UnidentifiedImageError, whose text holds a BytesIO repr), ValueError ("not
        # enough image data": a 1 KB RLE BMP claiming 6000 x 6000 pixels), struct.error,
        # SyntaxError, EOFError and more, by format.
        raise CorruptImage(UNDECODABLE) from None


def image_media_type(data: bytes) -> str:
    """The MIME type from the magic bytes, for serving the stored bytes untouched."""
    for magic, media_type in SIGNATURES.items():
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    raise CorruptImage(
        "stored bytes are not an image (no JPEG, PNG, GIF, WebP, BMP or TIFF signature)"
    )


def _check_signature(head: bytes, what: str) -> None:
    try:
        image_media_type(head)
    except CorruptImage as exc:
        raise CorruptImage(f"{what}: {exc}") from None


def read_lineidx(path: str | Path) -> np.ndarray:
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file (imgs.lineidx sits beside imgs.tsv)") from None
    try:
        return np.array(raw.split(), dtype=np.int64)
    except ValueError:
        raise InputError(f"{path}: not a line index (one integer byte offset per line)") from None


def row_ends(offsets: np.ndarray, size: int) -> np.ndarray:
    """Where each row's line ends: where the next row in the file starts, or at the file's end.
    imgs.lineidx may list rows in any order, and a row the corpus lacks points where another
    starts (offset 0 in the tests' files), so a row ends at the next distinct offset after its
    own."""
    starts = np.unique(offsets)
    return np.append(starts, size)[np.searchsorted(starts, offsets, side="right")]


def _text_end(line: bytes, start: int, end: int) -> int:
    """`end` moved back over trailing whitespace (the row's newline), not before `start`."""
    while end > start and line[end - 1] in ROW_WHITESPACE:
        end -= 1
    return end


class WebQAImageStore:
    """Random access into imgs.tsv: a row is one `os.pread` of its known length (its offset to
    the next row's), so the prefetch threads read rows in parallel, with no lock and no shared
    file position, and its base64 is decoded by pybase64 (SIMD; 15x the standard library here,
    docs/BENCHMARKS.md) straight from the bytes read."""

    def __init__(self, tsv_path: str | Path, lineidx_path: str | Path | None = None) -> None:
        self.tsv_path = Path(tsv_path)
        if not self.tsv_path.is_file():
            raise InputError(f"{self.tsv_path}: no such file")
        self.lineidx_path = Path(lineidx_path or self.tsv_path.with_suffix(".lineidx"))
        self.offsets = read_lineidx(self.lineidx_path)
        self._handle = self.tsv_path.open("rb", buffering=0)
        self._fd = self._handle.fileno()
        self.ends = row_ends(self.offsets, os.fstat(self._fd).st_size)

    def __len__(self) -> int:
        return len(self.offsets)

    def __reduce__(self) -> tuple:
        """Pickled as its paths: a Ray worker opens a handle of its own on its node."""
        return type(self), (self.tsv_path, self.lineidx_path)

    def _row(self, image_ref: str, limit: int = MAX_ROW_BYTES) -> tuple[int, bytes, int]:
        """(image id, the first `limit` bytes of its row, where the payload starts)."""
        try:
            image_id = int(image_ref)
        except ValueError:
            raise ImageNotFound(f"image id must be an integer, got {image_ref!r}") from None
        row = image_id % WEBQA_ID_MODULUS
        if not 0 <= row < len(self.offsets):
            raise ImageNotFound(f"image {image_id} is not in {self.tsv_path.name}")
        start = int(self.offsets[row])
        line = os.pread(self._fd, max(0, min(int(self.ends[row]) - start, limit)), start)
        tab = line.find(b"\t", 0, KEY_BYTES)
        if tab < 0 or line[:tab].strip() != str(image_id).encode():
            raise ImageNotFound(f"image {image_id} is not in {self.tsv_path.name}")
        payload = tab + 1
        while payload < len(line) and line[payload] in ROW_WHITESPACE:
            payload += 1
        return image_id, line, payload

    def _decode(self, image_id: int, line: bytes, start: int, end: int) -> bytes:
        """The image bytes of `line[start:end]`'s base64, read in place (a memoryview, no copy).
        Should the row run on past a newline (a lineidx that skips rows), it ends there."""
        while True:
            try:
                return pybase64.b64decode(memoryview(line)[start:end], validate=True)
            except binascii.Error:
                newline = line.find(b"\n", start, end)
                if newline < 0:
                    raise CorruptImage(
                        f"image {image_id}: corrupt base64 in {self.tsv_path.name}"
                    ) from None
                end = _text_end(line, start, newline)

    def read_bytes(self, image_ref: str) -> bytes:
        image_id, line, start = self._row(image_ref)
        return self._decode(image_id, line, start, _text_end(line, start, len(line)))

    def probe(self, image_ref: str) -> None:
        """Cheap check that the row exists and starts with an image (see the module doc)."""
        image_id, head, start = self._row(image_ref, PROBE_BYTES)
        newline = head.find(b"\n", start)
        end = _text_end(head, start, len(head) if newline < 0 else newline)
        image = self._decode(image_id, head, start, start + (end - start) // 4 * 4)
        _check_signature(image, f"image {image_id} in {self.tsv_path.name}")

    def close(self) -> None:
        self._handle.close()


class DirectoryImageStore:
    """Images as files under one root; references may not escape it."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self._folders: dict[str, str | None] = {}  # a reference's folder resolved, if inside

    def __reduce__(self) -> tuple:
        return type(self), (self.root,)

    def _path(self, image_ref: str) -> str:
        """The file a reference names, resolved, refused outside the root. A reference's
        folder is resolved once, so a corpus of 390K images in a few folders costs one `lstat`
        an image, not one for every part of its path; a name that is a link, "." or ".." is
        resolved in full."""
        if "\x00" in image_ref:  # no file has one; os.stat raises a ValueError on it
            raise ImageNotFound(f"image {image_ref!r} is not in {self.root}")
        folder, _, name = image_ref.rpartition("/")
        if name not in ("", ".", ".."):
            if folder not in self._folders:
                found = (self.root / folder).resolve()
                self._folders[folder] = str(found) if found.is_relative_to(self.root) else None
            parent = self._folders[folder]
            if parent is not None:
                path = os.path.join(parent, name)
                try:
                    mode = os.lstat(path).st_mode
                except OSError:
                    raise ImageNotFound(f"image {image_ref!r} is not in {self.root}") from None
                if stat.S_ISREG(mode):
                    return path
        resolved = (self.root / image_ref).resolve()
        if not resolved.is_relative_to(self.root) or not resolved.is_file():
            raise ImageNotFound(f"image {image_ref!r} is not in {self.root}")
        return str(resolved)

    def read_bytes(self, image_ref: str) -> bytes:
        with open(self._path(image_ref), "rb") as handle:
            return handle.read()

    def probe(self, image_ref: str) -> None:
        """The file exists and starts with an image signature."""
        with open(self._path(image_ref), "rb") as handle:
            _check_signature(handle.read(16), f"image {image_ref!r} in {self.root}")


def open_image_store(root: Path, config: dict[str, Any] | None) -> ImageStore | None:
    """The store an index's manifest describes (`images`: kind, and a path relative to the
    index), or None for an index without images."""
    if not config:
        return None
    path = (root / config["path"]).resolve()
    if config["kind"] == "webqa_tsv":
        return WebQAImageStore(path)
    return DirectoryImageStore(path)
