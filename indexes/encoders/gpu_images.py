"""Images at GPU speed: JPEG bytes decoded by nvJPEG, then resized, cropped and normalised on the
device exactly as the checkpoint's image processor specifies.

On a GPU host the Hugging Face processor was the image build's bottleneck (docs/BENCHMARKS.md,
"GPU"): its per-image Python work holds the GIL, so fourteen prefetch threads fed CLIP ViT-B/32
259 images/s where it encodes 5,394. Here a batch's compressed bytes go to nvJPEG in one call
(`torchvision.io.decode_jpeg(..., device="cuda")`) and the processor's resize, crop, rescale and
normalisation are a few torch ops per image on the device (`PixelRecipe`). Only compressed bytes
and uint8 pixels travel to the GPU; no float pixels cross a process boundary (a Ray actor reads
and decodes its own batch).

What nvJPEG is not given, Pillow decodes as the CPU path does (`decode_image`): PNG and the other
formats, CMYK JPEGs, truncated JPEGs (no EOI marker after the scan: nvJPEG leaves their missing
rows as whatever its output memory held, different from run to run, where Pillow fills them
grey), and any JPEG nvJPEG refuses (it fails a whole batch for one bad file, so such a batch is
retried one image at a time first). Their uint8 pixels then take the same resize on the device,
and an image neither can read is the CPU path's blank one, flagged unreadable. EXIF orientation
is read from the header and applied on the device, as `decode_image` does. torchvision's nvJPEG
binding has no warnings to route on: every status but success is an error (RuntimeError).

Each prefetch thread works on a CUDA stream of its own, so one batch's decoding overlaps the
encoder's work on the default stream, and the stream is idle whenever nvJPEG is called: its
hardware engine writes its output before work already queued on the stream has run, so it could
overwrite memory that queued kernels still read (torchvision's decoder allocates its output on
the caller's stream from blocks freed there; torchcodec PR 1634 and vision PR 9606 describe it).

torchvision is imported only for a CUDA device: it must never be installed on CPU hosts (it
breaks `import transformers` there). The recipe itself is plain torch, checked on CPU against the
processor in tests/test_gpu_images.py.
"""

from __future__ import annotations

import importlib.util
import io
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from mmrag.indexes.encoders.prefetch import load_or_blank
from mmrag.indexes.errors import InputError
from mmrag.indexes.images import DECODED_FORMATS, MAX_IMAGE_PIXELS, MIN_IMAGE_SIDE, ImageStore

if TYPE_CHECKING:
    import torch

# Pillow's resampling codes (PILImageResampling) that torch's antialiased interpolation
# reproduces: its bicubic uses Pillow's a = -0.5 when antialias is on.
TORCH_MODES = {2: "bilinear", 3: "bicubic"}
# The processor steps the recipe knows; a processor that asks for any other is left to the CPU.
KNOWN_STEPS = {"do_convert_rgb", "do_resize", "do_center_crop", "do_rescale", "do_normalize"}
ORIENTATION_TAG = 0x0112
# JPEG markers that stand alone, with no length after them: TEM and the restart markers.
STANDALONE_MARKERS = frozenset([0x01, *range(0xD0, 0xD8)])
START_OF_SCAN, END_OF_IMAGE = 0xDA, b"\xff\xd9"
# Decodes a batch of JPEG byte tensors into (3, H, W) uint8 tensors; raises RuntimeError for a
# batch it cannot decode whole, as torchvision's nvJPEG binding does.
JpegDecoder = Callable[[list["torch.Tensor"]], list["torch.Tensor"]]


def _pair(size: dict[str, int] | None) -> tuple[int, int] | None:
    return (size["height"], size["width"]) if size and size.get("height") else None


@dataclass(frozen=True)
class PixelRecipe:
    """What a Hugging Face image processor does to an RGB image, as numbers torch applies:
    resize (the short side to `shortest_edge`, or to exactly `size`), centre crop, then
    `(pixel * scale - mean) / std`."""

    shortest_edge: int | None
    size: tuple[int, int] | None  # (height, width), for processors that resize to a square
    crop: tuple[int, int] | None  # (height, width)
    mode: str  # torch's interpolation
    scale: float
    mean: tuple[float, ...]
    std: tuple[float, ...]

    @classmethod
    def of(cls, config: dict[str, Any]) -> PixelRecipe | None:
        """The recipe of a processor's config (`processor.to_dict()`, as saved beside the
        checkpoint), or None where it does something the recipe does not reproduce exactly
        (another filter, padding, a crop larger than the resized image...)."""
        steps = {key for key, value in config.items() if key.startswith("do_") and value}
        size = config.get("size") or {}
        edge, fixed = size.get("shortest_edge"), _pair(size)
        crop = _pair(config.get("crop_size")) if config.get("do_center_crop") else None
        smallest = fixed or (edge, edge)  # the smallest image the resize can give
        if (
            steps - KNOWN_STEPS
            or not config.get("do_resize")
            or config.get("resample") not in TORCH_MODES
            or bool(edge) == bool(fixed)
            or size.get("longest_edge")
            or not (crop or fixed)  # one shape per batch
            or (crop and (crop[0] > smallest[0] or crop[1] > smallest[1]))  # no padding
        ):
            return None
        normalise = bool(config.get("do_normalize"))
        return cls(
            shortest_edge=edge,
            size=fixed,
            crop=crop,
            mode=TORCH_MODES[config["resample"]],
            scale=float(config["rescale_factor"]) if config.get("do_rescale") else 1.0,
            mean=tuple(config["image_mean"]) if normalise else (0.0, 0.0, 0.0),
            std=tuple(config["image_std"]) if normalise else (1.0, 1.0, 1.0),
        )

    def resized(self, height: int, width: int) -> tuple[int, int]:
        """The processor's output size for an image of this size (transformers'
        get_resize_output_image_size: the long side truncated, not rounded)."""
        if self.size:
            return self.size
        assert self.shortest_edge is not None
        short, long = sorted((height, width))
        long = int(self.shortest_edge * long / short)
        edge = self.shortest_edge
        return (long, edge) if width <= height else (edge, long)

    def apply(
        self, images: Sequence[torch.Tensor], dtype: torch.dtype, *, together: bool = True
    ) -> torch.Tensor:
        """(N, 3, H, W) model input from (3, h, w) uint8 images on one device.

        Each image is resized in float in Pillow's two passes, each rounded to whole levels as
        Pillow's uint8 passes leave them (`pillow_passes`), then cropped with its top-left
        corner at the floor of the margin, as the processor crops; rescaling and normalisation
        run once over the batch. Images of one size are resized together: every op is one
        launch for the group instead of one per image (on a GPU host the per-image Python and
        launch cost held the GIL that the prefetch threads share), and each image's pixels are
        the same as alone, since the resize treats the images of a batch independently.
        `together=False` resizes each image alone, as before (bench/gpu_images.py --resize)."""
        import torch

        device = images[0].device if images else "cpu"
        height, width = self.crop or self.size or (0, 0)  # `of` promises one of them
        batch = torch.empty((len(images), 3, height, width), dtype=torch.float32, device=device)
        by_size: dict[tuple[int, int, int], list[int]] = {}
        for i, image in enumerate(images):
            by_size.setdefault((*image.shape[-2:], 0 if together else i), []).append(i)
        for (*size, _), members in by_size.items():
            resized = self._resized(torch.stack([images[i] for i in members]), tuple(size))
            if len(members) == len(images):
                batch.copy_(resized)
            else:
                batch[members] = resized
        mean = torch.tensor(self.mean, device=device).view(1, 3, 1, 1)
        std = torch.tensor(self.std, device=device).view(1, 3, 1, 1)
        return batch.mul_(self.scale).sub_(mean).div_(std).to(dtype)

    def _resized(self, images: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        """(n, 3, h, w) uint8 images of one `size` resized and cropped, in float."""
        import torch.nn.functional as F

        height, width = self.crop or self.size or (0, 0)
        pixels = images.float()
        target = self.resized(*size)
        for step in pillow_passes(*size, *target):
            if step != tuple(pixels.shape[-2:]):
                pixels = F.interpolate(pixels, step, mode=self.mode, antialias=True)
                pixels = pixels.round_().clamp_(0, 255)
        top, left = (target[0] - height) // 2, (target[1] - width) // 2
        return pixels[:, :, top : top + height, left : left + width]


def pillow_passes(
    height: int, width: int, new_height: int, new_width: int
) -> tuple[tuple[int, int], tuple[int, int]]:
    """The sizes after each of Pillow's two resize passes. Each pass rounds to whole levels and
    clips the filter's overshoot at sharp edges, so running both in float, or in the other
    order, is up to 15 levels off on the sample's photos (0.15 on average). Pillow 13 (the
    pinned one) resizes the width first unless the height shrinks by more than twice as many
    pixels as the width does (found by resizing both ways against it)."""
    if new_height < height and height - new_height > 2 * (width - new_width):
        return (new_height, width), (new_height, new_width)
    return (height, new_width), (new_height, new_width)


def orient(image: torch.Tensor, orientation: int) -> torch.Tensor:
    """A (3, H, W) image turned as `ImageOps.exif_transpose` turns the same EXIF orientation
    (2-8; any other value leaves it as stored)."""
    if orientation in (5, 6, 7, 8):  # the stored rows are the picture's columns
        image = image.transpose(1, 2)
    flips = {2: (2,), 3: (1, 2), 4: (1,), 6: (2,), 7: (1, 2), 8: (1,)}.get(orientation)
    return image.flip(flips) if flips else image


def first_scan(data: bytes) -> int | None:
    """Where a JPEG's first start-of-scan marker is, found by walking the marker segments from
    the start-of-image; None where the header ends or breaks first."""
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == START_OF_SCAN:
            return at
        if marker == 0xFF:  # a fill byte before the marker
            at += 1
        elif marker in STANDALONE_MARKERS:
            at += 2
        else:
            at += 2 + int.from_bytes(data[at + 2 : at + 4], "big")
    return None


def complete_jpeg(data: bytes) -> bool:
    """Whether the JPEG's scans end with an EOI marker. Inside a scan every 0xFF byte is
    followed by 0x00 or a restart marker, so an FFD9 after the first start-of-scan is the end
    of the image, and `rfind` finds it at once at the end of a whole file (bytes after it, such
    as a camera's trailer, are allowed)."""
    scan = first_scan(data)
    return scan is not None and data.rfind(END_OF_IMAGE, scan) >= 0


def jpeg_orientation(data: bytes | None) -> int | None:
    """The EXIF orientation of a JPEG that nvJPEG can decode as Pillow does and that
    `decode_image` would accept (complete, three-channel or grey, within the pixel limits),
    read from the header alone; None sends the image to Pillow, which decodes or refuses it as
    the CPU path does."""
    if data is None or not complete_jpeg(data):
        return None
    try:
        with Image.open(io.BytesIO(data), formats=DECODED_FORMATS) as image:
            width, height = image.size
            if (
                image.format != "JPEG"
                or image.mode not in ("RGB", "L")
                or min(width, height) < MIN_IMAGE_SIDE
                or width * height > MAX_IMAGE_PIXELS
            ):
                return None
            return int(image.getexif().get(ORIENTATION_TAG, 1))
    except Exception:  # whatever a broken header or EXIF block raises, Pillow's path decides
        return None


class GpuImages:
    """Batches of stored images to model input on one device (see the module doc)."""

    def __init__(
        self, recipe: PixelRecipe, device: str, dtype: torch.dtype, decode: JpegDecoder
    ) -> None:
        self.recipe = recipe
        self.device = device
        self.dtype = dtype
        self.decode = decode
        self.together = True  # images of one size resized as one batch (`PixelRecipe.apply`)
        self._streams = threading.local()
        # The decoder is handed the image bytes as read (`torch.frombuffer`, no copy): torch
        # warns that they are read-only, and nvJPEG only reads them.
        warnings.filterwarnings("ignore", "The given buffer is not writable", UserWarning)

    def pixels(self, store: ImageStore, refs: Sequence[str]) -> tuple[torch.Tensor, np.ndarray]:
        """Model input for `refs`, and which of them decoded (the others are blank); on a CUDA
        device, computed on this thread's stream and finished before it is returned."""
        with self._own_stream():
            images, decoded = self._upright(store, refs)
            return self.recipe.apply(images, self.dtype, together=self.together), decoded

    @contextmanager
    def _own_stream(self) -> Iterator[None]:
        """This thread's CUDA stream made current, and waited for on the way out (the batch
        then goes to the encoder on another stream); nothing on a CPU device."""
        if not self.device.startswith("cuda"):
            yield
            return
        import torch

        stream = getattr(self._streams, "stream", None)
        if stream is None:
            stream = self._streams.stream = torch.cuda.Stream(self.device)
        with torch.cuda.stream(stream):
            yield
        stream.synchronize()

    def _upright(
        self, store: ImageStore, refs: Sequence[str]
    ) -> tuple[list[torch.Tensor], np.ndarray]:
        """(3, H, W) uint8 images on the device, upright, and which decoded."""
        import torch

        data = [_read(store, ref) for ref in refs]
        jpegs = [(i, turn) for i, item in enumerate(data) if (turn := jpeg_orientation(item))]
        images: dict[int, torch.Tensor] = {}
        for (i, turn), image in zip(jpegs, self._nvjpeg([data[i] for i, _ in jpegs]), strict=True):
            if image is not None:
                images[i] = orient(image, turn)
        decoded = np.ones(len(refs), bool)
        for i, ref in enumerate(refs):
            if i not in images:
                picture, decoded[i] = load_or_blank(store, ref, data[i])
                images[i] = torch.from_numpy(np.array(picture)).permute(2, 0, 1).to(self.device)
        return [images[i] for i in range(len(refs))], decoded

    def _nvjpeg(self, data: list[bytes]) -> list[torch.Tensor | None]:
        """Decoded images, None where the decoder refused one."""
        import torch

        if not data:
            return []
        encoded = [torch.frombuffer(item, dtype=torch.uint8) for item in data]
        if self.device.startswith("cuda"):  # nothing queued that nvJPEG could overwrite
            torch.cuda.current_stream(self.device).synchronize()
        try:
            return list(self.decode(encoded))
        except RuntimeError:  # one bad file fails the batch: find it
            if self.device.startswith("cuda"):  # after whatever the failed call left running
                torch.cuda.synchronize(self.device)
            return [self._one(item) for item in encoded]

    def _one(self, encoded: torch.Tensor) -> torch.Tensor | None:
        try:
            return self.decode([encoded])[0]
        except RuntimeError:
            return None


def _read(store: ImageStore, ref: str) -> bytes | None:
    try:
        return store.read_bytes(ref)
    except InputError:
        return None


def gpu_images(processor: Any, device: str, dtype: torch.dtype) -> GpuImages | None:
    """The GPU pipeline for this processor on this device, or None where the CPU path stays:
    a CPU device, no torchvision (CPU hosts), or a processor the recipe cannot reproduce."""
    if not device.startswith("cuda") or importlib.util.find_spec("torchvision") is None:
        return None
    recipe = PixelRecipe.of(processor.to_dict())
    if recipe is None:
        return None
    from torchvision.io import ImageReadMode, decode_jpeg

    decode = partial(decode_jpeg, mode=ImageReadMode.RGB, device=device)
    return GpuImages(recipe, device, dtype, decode)
