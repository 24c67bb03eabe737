"""CLIP image builds: images/s end to end from imgs.tsv against encode-only, per image path.

    python -m bench.gpu_images --device cuda --images 8192 --batch 256 --workers 8 \\
        --out docs/bench/gpu-images-h100.json
    python -m bench.gpu_images --device cuda --check --out docs/bench/gpu-images-check-h100.json
    python -m bench.gpu_images --device cpu --images 64 --batch 32 --workers 2 --models vit-b-32

Random-weight CLIP of the real sizes (throughput does not depend on the weights): ViT-B/32 and
ViT-L/14 (tests/tiny_models.py). The store is bench/dense.py's: 640x480 photo-like JPEGs in
imgs.tsv, as the GPU figures of docs/BENCHMARKS.md were measured on.

- end to end: what a build does for its CLIP component (`LocalExecutor.image_vectors`: rows read
  from imgs.tsv, decoded and preprocessed in prefetch threads, encoded, then the vectors saved);
- decode + preprocess: the same prefetch threads with no encoder;
- encode only: the encoder on pixels already on its device, in the same batches.

Paths: "gpu" (nvJPEG and the processor's recipe on the device, `indexes/encoders/gpu_images.py`;
CUDA with torchvision only) and "processor" (Pillow and the Hugging Face processor in threads:
the CPU path, and the GPU build's before issue 26).

`--check`: on real photos (the sample corpus's 129 and scikit-learn's two, one of them also
stored with an EXIF turn, in grey and as PNG) how far the encoder's path is from the CPU
processor (Pillow backend): pixel differences in levels of 255, max and mean, and the cosine
of ViT-B/32's embeddings of the two. Without a CUDA device with torchvision, Pillow decodes
and the recipe is checked alone.
"""

from __future__ import annotations

import argparse
import importlib.resources
import io
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.dense import photo_store, rate
from bench.report import write_report
from mmrag.indexes.encoders.clip import load_clip
from mmrag.indexes.encoders.gpu_images import PixelRecipe, gpu_images
from mmrag.indexes.encoders.prefetch import batch_pixels, prefetch_batches
from mmrag.indexes.executor import LocalExecutor, no_progress
from mmrag.indexes.images import WebQAImageStore, decode_image
from tests.helpers import SAMPLE, write_imgs_tsv
from tests.tiny_models import tiny_clip

MODELS = {"vit-b-32": {"vit_b_32": True}, "vit-l-14": {"vit_l_14": True}}


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


def throughput(model: str, n: int, batch: int, workers: int, device: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        clip = load_clip(str(tiny_clip(folder / "clip", **MODELS[model])), device=device)
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
        if clip.gpu_images is not None:
            result["gpu"] = timed_path(clip, store, refs, batch, workers, folder)
            clip.gpu_images = None
        result["processor"] = timed_path(clip, store, refs, batch, workers, folder)
    return result


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
        levels, cosines = [], []
        for start in range(0, len(refs), chunk):
            part = refs[start : start + chunk]
            pictures = [decode_image(store.read_bytes(ref)) for ref in part]
            expected = processor(images=pictures, return_tensors="np")["pixel_values"]
            if pipeline is not None:
                got = pipeline.pixels(store, part)[0].cpu().numpy()
            else:
                tensors = [torch.from_numpy(np.array(p)).permute(2, 0, 1) for p in pictures]
                got = recipe.apply(tensors, torch.float32).numpy()
            levels.append(np.abs(got - expected) * std / processor.rescale_factor)
            cosines.append(np.sum(clip.encode_pixels(got) * clip.encode_pixels(expected), axis=1))
    apart, cosine = np.concatenate(levels), np.concatenate(cosines)
    per_photo = apart.mean(axis=(1, 2, 3))
    return {
        "photos": len(photos),
        "decoder": "nvJPEG" if pipeline is not None else "Pillow (no CUDA device with torchvision)",
        "model": f"CLIP vit-b-32 (random weights), {clip.dtype} on {device}",
        "pixel_max_abs_levels": round(float(apart.max()), 3),
        "pixel_mean_abs_levels": round(float(apart.mean()), 4),
        "worst_photo_mean_abs_levels": round(float(per_photo.max()), 4),
        "cosine_min": round(float(cosine.min()), 6),
        "cosine_mean": round(float(cosine.mean()), 6),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--images", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--check", action="store_true", help="pixels and embeddings only")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import torch

    results: dict = {
        "machine": {
            "cpus": os.cpu_count(),
            "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        }
    }
    if args.check:
        results["check"] = check(args.device)
    else:
        for model in args.models:
            results[model] = throughput(model, args.images, args.batch, args.workers, args.device)
            print(results[model], file=sys.stderr)
    write_report(results, args.out)


if __name__ == "__main__":
    main()
