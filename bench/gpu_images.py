"""CLIP image builds: images/s end to end from imgs.tsv against encode-only, per image path,
and the read of imgs.tsv alone.

    python -m bench.gpu_images --stage read --images 4096 --workers 2 \\
        --out docs/bench/image-read-cpu.json
    python -m bench.gpu_images --device cuda --images 6144 --batch 256 --workers 8 --paths gpu \\
        --out docs/bench/gpu-images-h100.json
    python -m bench.gpu_images --device cuda --check --out docs/bench/gpu-images-check-h100.json
    python -m bench.gpu_images --device cpu --images 64 --batch 32 --workers 2 --models vit-b-32

Random-weight CLIP of the real sizes (throughput does not depend on the weights): ViT-B/32 and
ViT-L/14 (tests/tiny_models.py). The store holds 640x480 noise JPEGs (233 KB at quality 85,
WebQA-sized, and as costly to decode as photos), 256 distinct ones repeated under their own
keys, so that a device's minutes go to measuring rather than to encoding JPEGs. Each model's
figures are written (--out) as soon as they are measured, so a run cut short keeps them.

- read: imgs.tsv rows to image bytes (`WebQAImageStore.read_bytes`: the row's pread and its
  base64), each worker reading whole batches as a build's prefetch threads do, with one worker
  and with --workers; and base64 alone, the standard library's against pybase64's;

- end to end: what a build does for its CLIP component (`LocalExecutor.image_vectors`: rows read
  from imgs.tsv, decoded and preprocessed in prefetch threads, encoded, then the vectors saved);
- decode + preprocess: the same prefetch threads with no encoder;
- encode only: the encoder on pixels already on its device, in the same batches.

Paths (`--paths gpu|processor|both|gpu-resize`): "gpu" (nvJPEG and the processor's recipe on
the device, `indexes/encoders/gpu_images.py`; CUDA with torchvision only) and "processor"
(Pillow and the Hugging Face processor in threads: the CPU path, and the GPU build's before
issue 26); `gpu-resize` measures the gpu path twice, "gpu_alone" resizing each image alone
(as before issue 40) and "gpu" resizing the images of one size together.

`--check`: on real photos (the sample corpus's 129 and scikit-learn's two, one of them also
stored with an EXIF turn, in grey and as PNG) how far the encoder's path is from the CPU
processor (Pillow backend): pixel differences in levels of 255, max and mean, per photo at the
median and at worst, and the cosine of ViT-B/32's embeddings of the two; on the GPU path also
how far each photo decoded alone is from the same photo decoded in a batch, in model-input
units (0: nothing of it left to what the device's memory held). Without a CUDA device with
torchvision, Pillow decodes and the recipe is checked alone.
"""

from __future__ import annotations

import argparse
import base64
import importlib.resources
import io
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pybase64
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.dense import rate
from bench.report import machine, write_report
from mmrag.indexes.encoders.clip import load_clip
from mmrag.indexes.encoders.gpu_images import PixelRecipe, gpu_images
from mmrag.indexes.encoders.prefetch import batch_pixels, prefetch_batches
from mmrag.indexes.executor import LocalExecutor, no_progress
from mmrag.indexes.images import WebQAImageStore, decode_image
from tests.helpers import SAMPLE, write_imgs_tsv
from tests.tiny_models import tiny_clip

MODELS = {"vit-b-32": {"vit_b_32": True}, "vit-l-14": {"vit_l_14": True}}
PATHS = {
    "gpu": ("gpu",),
    "processor": ("processor",),
    "both": ("gpu", "processor"),
    # The GPU path with each image resized alone (as before issue 40), then as it is now.
    "gpu-resize": ("gpu_alone", "gpu"),
}
DISTINCT_PHOTOS = 256


def photo_store(folder: Path, n: int) -> WebQAImageStore:
    """imgs.tsv of n rows of 640x480 noise JPEGs, DISTINCT_PHOTOS of them repeated."""
    rng = np.random.default_rng(0)
    photos = [
        image_bytes(
            Image.fromarray(rng.integers(0, 256, (480, 640, 3), np.uint8)), "JPEG", quality=85
        )
        for _ in range(min(n, DISTINCT_PHOTOS))
    ]
    images = {30_000_000 + i: photos[i % len(photos)] for i in range(n)}
    return WebQAImageStore(write_imgs_tsv(folder, images))


def read_rate(store: WebQAImageStore, refs: list[str], batch: int, workers: int) -> float:
    """Rows read to image bytes per second, each worker reading whole batches."""

    def read(start: int) -> None:
        for ref in refs[start : start + batch]:
            store.read_bytes(ref)

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(read, range(0, len(refs), batch)))
    return rate(len(refs), time.perf_counter() - started)


def decode_rate(decode: Callable[[bytes], bytes], payloads: list[bytes]) -> float:
    started = time.perf_counter()
    for payload in payloads:
        decode(payload)
    return rate(len(payloads), time.perf_counter() - started)


def read_stage(n: int, batch: int, workers: int, repeats: int) -> dict:
    """The read alone, from the page cache (every row read once beforehand), in turns."""
    with tempfile.TemporaryDirectory() as tmp:
        store = photo_store(Path(tmp), n)
        refs = [str(30_000_000 + i) for i in range(n)]
        sizes = [len(store.read_bytes(ref)) for ref in refs]
        counts = sorted({1, workers})
        runs: dict[int, list[float]] = {count: [] for count in counts}
        for _ in range(repeats):
            for count in counts:
                runs[count].append(read_rate(store, refs, batch, count))
        payloads = [base64.b64encode(store.read_bytes(ref)) for ref in refs[:DISTINCT_PHOTOS]]
        result: dict = {
            "images": n,
            "mean_jpeg_bytes": round(statistics.mean(sizes)),
            "batch": batch,
        }
        for count in counts:
            result[f"read_{count}_workers_per_s"] = statistics.median(runs[count])
            result[f"read_{count}_workers_runs"] = runs[count]
        result["base64_alone_1_thread_per_s"] = {
            "stdlib": decode_rate(lambda p: base64.b64decode(p, validate=True), payloads),
            "pybase64": decode_rate(lambda p: pybase64.b64decode(p, validate=True), payloads),
        }
    return result


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def timed_path(clip, store, refs: list[str], batch: int, workers: int, folder: Path) -> dict:
    """End to end and decode + preprocess alone, on the path the encoder has now."""
    executor = LocalExecutor(image_batch=batch, image_workers=workers)
    executor.image_vectors(clip, store, refs[: batch * 2], no_progress)  # warm-up
    started = time.perf_counter()
    vectors, decoded = executor.image_vectors(clip, store, refs, no_progress)
    np.save(folder / "vectors.npy", vectors)
    end_to_end = time.perf_counter() - started
    started = time.perf_counter()
    for _ in prefetch_batches(store, refs, clip, batch_size=batch, workers=workers):
        pass
    synchronize(clip.device)
    decode = time.perf_counter() - started
    return {
        "end_to_end_per_s": rate(len(refs), end_to_end),
        "decode_preprocess_per_s": rate(len(refs), decode),
        "unreadable": int((~decoded).sum()),
    }


def encode_only(clip, store, refs: list[str], batch: int) -> float:
    pixels, _ = batch_pixels(clip, store, refs[:batch])
    pixels = clip.torch.as_tensor(pixels).to(clip.device, dtype=clip.dtype)
    clip.encode_pixels(pixels)  # warm-up
    started = time.perf_counter()
    for _ in range(-(-len(refs) // batch)):
        clip.encode_pixels(pixels)
    return rate(len(refs), time.perf_counter() - started)


def throughput(
    model: str,
    n: int,
    batch: int,
    workers: int,
    device: str,
    paths: tuple[str, ...],
    measured: Callable[[dict], None],
) -> None:
    """`measured(result)` after each figure, so that every figure is kept as soon as it is."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        clip = load_clip(str(tiny_clip(folder / "clip", **MODELS[model])), device=device)
        if "gpu" in paths and clip.gpu_images is None:
            raise SystemExit("the gpu path needs a CUDA device with torchvision")
        pipeline, clip.gpu_images = clip.gpu_images, None  # encode-only's pixels, either path
        store = photo_store(folder, n)
        refs = [str(30_000_000 + i) for i in range(n)]
        result = {
            "model": f"CLIP {model} (random weights)",
            "device": device,
            "dtype": str(clip.dtype),
            "images": n,
            "batch": batch,
            "workers": workers,
            "encode_only_per_s": encode_only(clip, store, refs, batch),
        }
        measured(result)
        for path in paths:
            clip.gpu_images = pipeline if path.startswith("gpu") else None
            if pipeline is not None:
                pipeline.together = path != "gpu_alone"
            result[path] = timed_path(clip, store, refs, batch, workers, folder)
            measured(result)


def image_bytes(picture: Image.Image, format: str, **options) -> bytes:
    buffer = io.BytesIO()
    picture.save(buffer, format=format, **options)
    return buffer.getvalue()


def check_photos() -> list[bytes]:
    """The sample corpus's photos and scikit-learn's two as stored, and china.jpg again with an
    EXIF turn (orientation 6), in grey and as a PNG."""
    sample = WebQAImageStore(SAMPLE / "imgs.tsv")
    keys = [line.split(b"\t")[0].decode() for line in (SAMPLE / "imgs.tsv").open("rb")]
    photos = [sample.read_bytes(key) for key in keys]
    folder = importlib.resources.files("sklearn.datasets") / "images"
    photos += [(folder / name).read_bytes() for name in ("china.jpg", "flower.jpg")]
    china = decode_image(photos[-2])
    exif = Image.Exif()
    exif[0x0112] = 6
    photos.append(image_bytes(china, "JPEG", quality=90, exif=exif))
    photos.append(image_bytes(china.convert("L"), "JPEG", quality=90))
    photos.append(image_bytes(china, "PNG"))
    return photos


def check(device: str, chunk: int = 64) -> dict:
    import torch
    from transformers import CLIPImageProcessorPil

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        clip = load_clip(str(tiny_clip(folder / "clip", vit_b_32=True)), device=device)
        processor = CLIPImageProcessorPil.from_pretrained(folder / "clip")  # the CPU one
        pipeline = gpu_images(processor, device, torch.float32)
        recipe = PixelRecipe.of(processor.to_dict())
        assert recipe is not None
        photos = check_photos()
        store = WebQAImageStore(write_imgs_tsv(folder, dict(enumerate(photos, 30_000_000))))
        refs = [str(30_000_000 + i) for i in range(len(photos))]
        std = np.asarray(processor.image_std, np.float32).reshape(1, 3, 1, 1)
        levels, cosines, batched = [], [], []
        for start in range(0, len(refs), chunk):
            part = refs[start : start + chunk]
            pictures = [decode_image(store.read_bytes(ref)) for ref in part]
            expected = processor(images=pictures, return_tensors="np")["pixel_values"]
            if pipeline is not None:
                got = pipeline.pixels(store, part)[0].cpu().numpy()
                alone = [pipeline.pixels(store, [ref])[0][0].cpu().numpy() for ref in part]
                batched.append(float(np.abs(np.stack(alone) - got).max()))
            else:
                tensors = [torch.from_numpy(np.array(p)).permute(2, 0, 1) for p in pictures]
                got = recipe.apply(tensors, torch.float32).numpy()
            levels.append(np.abs(got - expected) * std / processor.rescale_factor)
            cosines.append(np.sum(clip.encode_pixels(got) * clip.encode_pixels(expected), axis=1))
    apart, cosine = np.concatenate(levels), np.concatenate(cosines)
    per_photo = apart.mean(axis=(1, 2, 3))
    result = {
        "photos": len(photos),
        "decoder": "nvJPEG" if pipeline is not None else "Pillow (no CUDA device with torchvision)",
        "model": f"CLIP vit-b-32 (random weights), {clip.dtype} on {device}",
        "pixel_max_abs_levels": round(float(apart.max()), 3),
        "pixel_mean_abs_levels": round(float(apart.mean()), 4),
        "photo_mean_abs_levels_median": round(float(np.median(per_photo)), 4),
        "worst_photo_mean_abs_levels": round(float(per_photo.max()), 4),
        "cosine_min": round(float(cosine.min()), 6),
        "cosine_mean": round(float(cosine.mean()), 6),
    }
    if batched:  # in model-input units: 0 or not is what matters
        result["alone_vs_batch_max_abs_difference"] = max(batched)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--images", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--paths", choices=list(PATHS), default="both")
    parser.add_argument("--stage", choices=["all", "read"], default="all")
    parser.add_argument("--repeats", type=int, default=3, help="runs of the read stage, in turns")
    parser.add_argument("--check", action="store_true", help="pixels and embeddings only")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import torch

    results: dict = {
        "command": " ".join(sys.argv),
        "machine": machine(
            torch=torch.__version__,
            gpu=torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        ),
    }
    if args.check:
        results["check"] = check(args.device)
    elif args.stage == "read":
        results["read"] = read_stage(args.images, args.batch, args.workers, args.repeats)
    else:
        for model in args.models:

            def measured(result: dict, model: str = model) -> None:
                results[model] = result
                write_report(results, args.out)

            throughput(
                model,
                args.images,
                args.batch,
                args.workers,
                args.device,
                PATHS[args.paths],
                measured,
            )
    write_report(results, args.out)


if __name__ == "__main__":
    main()
