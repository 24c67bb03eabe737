"""What grounding costs per image: open-vocabulary detectors of real sizes, and the naming step.

    python -m bench.detector --images 12 --threads 2 --out docs/bench/detector-cpu.json

Detectors are random-weight models of the real configurations (throughput does not depend on
the weights), built by tests/tiny_models.py with `base_size=True` and loaded by path through
`OpenVocabularyDetector`, so each figure is one `detect` call as grounding makes it: PIL
preprocessing (resize and pad to the model's square), the forward pass, post-processing and
the best-box search. OWLv2 base (ViT-B/16 at 960 px: 3,600 patches) is the Toloka-style
detector; OWL-ViT base (ViT-B/32 at 768 px: 576 patches) is the cheap one beside it. The
two-step grounder's other half, the embedded SmolLM2 naming the object (llama.cpp), is timed on
Toloka fixture questions. Images are 640x480 photo-like JPEGs (COCO's usual size).
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import latency_percentiles, write_report
from mmrag.generation.detector import OpenVocabularyDetector
from mmrag.generation.engines import load_engine
from mmrag.generation.grounding import NAME_TOKENS, named_object
from mmrag.generation.prompts import name_object_messages
from tests.tiny_models import tiny_owl

TOLOKA = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "toloka" / "train_sample.csv"
POINTS = (50, 90)


def photos(n: int) -> list[Image.Image]:
    rng = np.random.default_rng(0)
    images = []
    for _ in range(n):
        buffer = io.BytesIO()
        pixels = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=85)
        images.append(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
    return images


def detector_latency(name: str, v2: bool, images: list[Image.Image], device: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        detector = OpenVocabularyDetector(
            str(tiny_owl(Path(tmp) / name, v2=v2, base_size=True)), device=device
        )
        load_s = time.perf_counter() - started
        config = detector.model.config.vision_config
        detector.detect(images[0], "a car")  # warm-up
        seconds = []
        for image in images:
            started = time.perf_counter()
            region = detector.detect(image, "a car")
            seconds.append(time.perf_counter() - started)
            assert region is not None
    return {
        "model": name,
        "input": f"{config.image_size} px, patch {config.patch_size}",
        "parameters_m": round(sum(p.numel() for p in detector.model.parameters()) / 1e6, 1),
        "device": device,
        "images": len(images),
        "build_and_load_s": round(load_s, 2),
        "mean_ms": round(1000 * float(np.mean(seconds)), 1),
        **latency_percentiles(seconds, POINTS, digits=1),
    }


def naming_latency(n: int) -> dict:
    with TOLOKA.open(newline="") as handle:
        questions = [row["question"] for row in csv.DictReader(handle)][:n]
    engine = load_engine("llamacpp")
    engine.chat(name_object_messages(questions[0], image=None), max_tokens=NAME_TOKENS)
    seconds, names = [], []
    for question in questions:
        started = time.perf_counter()
        reply = engine.chat(name_object_messages(question, image=None), max_tokens=NAME_TOKENS)
        seconds.append(time.perf_counter() - started)
        names.append(named_object(reply))
    return {
        "model": "SmolLM2-135M-Instruct Q4_1 (llama.cpp, packaged)",
        "questions": len(questions),
        "named": sum(bool(name) for name in names),
        "examples": dict(zip(questions[:5], names[:5], strict=True)),
        "mean_ms": round(1000 * float(np.mean(seconds)), 1),
        **latency_percentiles(seconds, POINTS, digits=1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=12, help="timed images per detector")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--no-naming",
        action="store_true",
        help="skip the SmolLM2 naming step (a GPU host "
        "without mmrag[ml] installed lacks the packaged model; naming runs on the CPU anyway)",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    images = photos(args.images)
    results = {
        "machine": platform.processor() or platform.machine(),
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "detectors": [
            detector_latency("owlv2-base-patch16 (random)", True, images, args.device),
            detector_latency("owlvit-base-patch32 (random)", False, images, args.device),
        ],
    }
    if not args.no_naming:
        results["naming"] = naming_latency(args.images)
    write_report(results, args.out)


if __name__ == "__main__":
    main()
