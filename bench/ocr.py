"""Scene-text OCR at index build: its images/s, what it adds to build time, what it buys.

    python -m bench.ocr --throughput-images 100 --photos 2000 --out docs/bench/ocr.json

OCR (PP-OCRv4 through rapidocr-onnxruntime) is the slowest step of a CPU build, so this measures,
on the machine it runs on (every build here on the CPU, the packaged MiniLM as text encoder in
every run, so that `--ocr` is the only difference between the two builds of a pair):

1. OCR throughput over the first N procedural scene-text photos of bench/scene_text.py (signs,
   shop fronts, buses, price boards; 640x420 JPEGs): images/s of `ocr_images`, the function the
   build's OCR step runs, with the build's defaults (one process per core, `--ocr-workers`'s
   default; pool start-up included); the same through one process (`--ocr-workers 1`,
   onnxruntime's own threads); and the per-image latency of one single-threaded reader
   (decode + detection + recognition, as in each worker). Also how many of the photos' ST-VQA
   answers are in the text kept (confidence >= 0.5), a check that the OCR reads the signs.
2. `mmrag index build` wall time with and without `--ocr` (a fresh OCR cache each time): on the
   sample corpus with the Makefile's `sample-index` flags (plus `mmrag retrieval calibrate`,
   timed apart), and on a WebQA-format corpus of P scene-text photos (imgs.tsv + imgs.lineidx,
   one question per photo) whose captions say what is pictured, never what is written. When the
   OCR build of P photos would run past --max-ocr-minutes at the rate of step 1, both builds run
   on fewer photos and are scaled linearly to P (marked "extrapolated" in the JSON).
3. The sample's 11 `street signs` questions (only the painted text answers them), against the
   sample index built with and without `--ocr` (each calibrated as `make sample-index` does):
   the gold image's rank in `mmrag search` (k=10), and the answer `mmrag ask --json` gives
   (service defaults): does it contain Keywords_A, cite the gold image, not decline; and its
   WebQA Acc. Both commands' code runs in this process (one model load per index).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import latency_percentiles, write_report

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
SAMPLE_JSON = SAMPLE / "WebQA_sample.json"
MMRAG = [sys.executable, "-m", "mmrag.service.cli"]
BUILD_SECONDS = re.compile(r" in ([\d.]+) s$")
FIRST_IMAGE_ID = 30_000_000
WEBQA_IMAGES = 390_000  # about the images of the WebQA release (imgs.tsv)

# What a caption says of each kind of scene_text photo: what is pictured, never what is written.
CAPTIONS = {
    "shop": "A shop front with a painted sign above its window.",
    "bus": "A city bus at a stop, its destination board lit.",
    "street": "A street name plate fixed to a wall, with a traffic sign.",
    "warning": "A warning sign on a fence.",
    "prices": "A price board outside a kiosk.",
    "door": "A front door with a plaque beside it.",
    "market": "A banner over the entrance to a street market.",
}
KIND_OF_QUESTION = (
    ("shop", "shop"),
    ("bus", "bus"),
    ("street", "street"),
    ("warn", "warning"),
    ("cost", "prices"),
    ("house number", "door"),
    ("market", "market"),
)


def load_now() -> float:
    return round(os.getloadavg()[0], 2)


# --- the photos --------------------------------------------------------------------------------


def draw_photos(folder: Path, count: int) -> tuple[list[Path], dict[str, list[dict]]]:
    """bench.scene_text's first `count` photos (seed 0) and their ST-VQA questions by file."""
    subprocess.run(
        [sys.executable, "-m", "bench.scene_text", "--out", str(folder), "--images", str(count)],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    questions: dict[str, list[dict]] = {}
    for item in json.loads((folder / "ST-VQA_synthetic.json").read_text())["data"]:
        questions.setdefault(item["file_path"], []).append(item)
    return sorted((folder / "images").glob("*.jpg")), questions


def kind_of(question: str) -> str:
    lowered = question.lower()
    return next(kind for word, kind in KIND_OF_QUESTION if word in lowered)


def photo_corpus(folder: Path, photos: list[Path], questions: dict[str, list[dict]]) -> list[str]:
    """WebQA_photos.json + imgs.tsv + imgs.lineidx (image i has id 30000000+i, line i); one
    question per photo, its only fact the photo, captioned by kind. Returns the build flags."""
    folder.mkdir(parents=True, exist_ok=True)
    tsv, offsets, records = folder / "imgs.tsv", [], {}
    with tsv.open("wb") as handle:
        for number, path in enumerate(photos):
            image_id = FIRST_IMAGE_ID + number
            offsets.append(handle.tell())
            handle.write(f"{image_id}\t".encode() + base64.b64encode(path.read_bytes()) + b"\n")
            item = questions[f"images/{path.name}"][0]
            kind = kind_of(item["question"])
            guid = f"scene-{number:05d}"
            records[guid] = {
                "Guid": guid,
                "Q": item["question"],
                "A": [item["answers"][0]],
                "Keywords_A": item["answers"][0],
                "Qcate": "Others",
                "split": "val",
                "topic": "scene text",
                "img_posFacts": [
                    {
                        "image_id": image_id,
                        "title": f"Street photo {number} ({kind})",
                        "caption": CAPTIONS[kind],
                        "url": f"https://example.org/scene/{number}",
                        "imgUrl": f"https://example.org/scene/{number}.jpg",
                    }
                ],
                "img_negFacts": [],
                "txt_posFacts": [],
                "txt_negFacts": [],
            }
    (folder / "imgs.lineidx").write_text("".join(f"{offset}\n" for offset in offsets))
    corpus = folder / "WebQA_photos.json"
    corpus.write_text(json.dumps(records))
    return ["--corpus", str(corpus), "--images", str(tsv)]


# --- 1. OCR throughput -------------------------------------------------------------------------


def ocr_throughput(photos: list[Path], questions: dict[str, list[dict]]) -> dict:
    from mmrag.indexes.images import MAX_IMAGE_PIXELS
    from mmrag.indexes.ocr.batch import BATCH_SIZE, OcrRunStats, ocr_images, read_one
    from mmrag.indexes.ocr.cache import OcrCache
    from mmrag.indexes.ocr.reader import (
        DEFAULT_MIN_CONFIDENCE,
        OcrModels,
        OcrReader,
        keep,
        reader_identity,
    )

    models = OcrModels()
    identity = reader_identity(models)
    data = [path.read_bytes() for path in photos]
    refs = [str(number) for number in range(len(data))]

    def load(ref: str) -> bytes:
        return data[int(ref)]

    def pooled(workers: int) -> tuple[dict, list]:
        stats = OcrRunStats()
        load_average = load_now()
        started = time.perf_counter()
        found = list(ocr_images(refs, load, OcrCache(None, identity), workers=workers, stats=stats))
        seconds = time.perf_counter() - started
        figures = {
            "workers": workers,
            "batch_size": BATCH_SIZE,
            "load_average_1m": load_average,
            "seconds": round(seconds, 2),
            "images_per_s": round(len(data) / seconds, 2),
            "read": stats.read,
            "unreadable": len(stats.unreadable),
        }
        return figures, [lines for _, lines in found]

    default_workers = os.cpu_count() or 1  # `mmrag index build --ocr-workers` default
    build_default, lines = pooled(default_workers)
    one_process, _ = pooled(1)

    reader = OcrReader(models, threads=1)
    read_one(reader, data[0], MAX_IMAGE_PIXELS)  # warm-up
    seconds = []
    load_average = load_now()
    for image in data:
        started = time.perf_counter()
        read_one(reader, image, MAX_IMAGE_PIXELS)
        seconds.append(time.perf_counter() - started)
    single = {
        "threads": 1,
        "load_average_1m": load_average,
        **latency_percentiles(seconds, points=(50, 90), digits=1),
        "mean_ms": round(statistics.fmean(seconds) * 1000, 1),
        "images_per_s": round(len(seconds) / sum(seconds), 2),
    }

    answers = read_back = kept_lines = 0
    for path, raw in zip(photos, lines, strict=True):
        kept = keep(raw or [], DEFAULT_MIN_CONFIDENCE)
        kept_lines += len(kept)
        text = " ".join(line.text for line in kept).lower()
        for item in questions[f"images/{path.name}"]:
            answers += 1
            read_back += item["answers"][0].lower() in text
    return {
        "images": len(data),
        "image_size": "640x420 JPEG",
        "reader": identity,
        "build_default": build_default,
        "one_process_ort_threads": one_process,
        "single_thread_per_image": single,
        "lines_kept_per_image": round(kept_lines / len(data), 2),
        "stvqa_answers_in_kept_text": f"{read_back}/{answers}",
    }


# --- 2. build time -----------------------------------------------------------------------------


def build(flags: list[str], out: Path, ocr: bool) -> dict:
    """`mmrag index build FLAGS --out OUT [--ocr]` as a user runs it; the OCR cache it keeps
    beside OUT (in the temporary folder) is deleted first, so every image is read."""
    command = [*MMRAG, "index", "build", *flags, "--out", str(out), *(["--ocr"] if ocr else [])]
    out.with_name(f"{out.name}.ocr-cache.jsonl").unlink(missing_ok=True)  # no image read before
    load_average = load_now()
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - started
    if result.returncode:
        raise SystemExit(f"build failed: {result.stderr.strip()[-800:]}")
    summary = result.stdout.strip().splitlines()[-1]
    match = BUILD_SECONDS.search(summary)
    figures: dict = {
        "ocr": ocr,
        "load_average_1m": load_average,
        "wall_s": round(wall, 1),
        "build_s": float(match.group(1)) if match else None,
        "summary": summary.replace(str(out), "OUT"),
    }
    manifest = json.loads((out / "manifest.json").read_text())
    if ocr_summary := manifest.get("ocr"):
        figures["ocr_s"] = ocr_summary["seconds"]
        figures["ocr_read"] = ocr_summary["read"]
        figures["ocr_images_with_text"] = ocr_summary["images_with_text"]
        if ocr_summary["seconds"]:
            figures["ocr_images_per_s"] = round(ocr_summary["read"] / ocr_summary["seconds"], 2)
    return figures


def calibrate(index: Path) -> float:
    command = [*MMRAG, "retrieval", "calibrate", "--index", str(index)]
    started = time.perf_counter()
    subprocess.run([*command, "--questions", str(SAMPLE_JSON)], check=True, capture_output=True)
    return round(time.perf_counter() - started, 1)


def pair(runs: list[dict]) -> dict:
    """The runs of one build, and the fastest as the figure (others share the machine)."""
    best = min(runs, key=lambda run: run["wall_s"])
    return {"wall_s": best["wall_s"], "build_s": best["build_s"], "runs": runs}


# --- 3. quality on the street-sign questions ---------------------------------------------------


def street_sign_quality(index: Path) -> dict:
    from mmrag.core.components import build_pipeline
    from mmrag.core.options import settings_from
    from mmrag.evaluation.metrics.webqa_acc import keyword_accuracies
    from mmrag.indexes.corpus.webqa import iter_questions
    from mmrag.service.cli import build_parser
    from mmrag.service.schemas import AnswerResponse

    questions = [q for q in iter_questions(SAMPLE_JSON) if q.topic == "street signs"]
    # The settings `mmrag ask QUESTION --index INDEX --json` runs with.
    args = build_parser().parse_args(["ask", "-", "--index", str(index), "--json"])
    pipeline = build_pipeline(settings_from(args))
    rows = []
    for question in questions:
        gold = set(question.gold_source_ids)
        # `mmrag search QUESTION --index INDEX` (k=10)
        hits = pipeline.retriever.search(question.question, 10, "all")
        ranks = [rank for rank, hit in enumerate(hits, start=1) if hit.source.id in gold]
        # `mmrag ask QUESTION --index INDEX --json`
        with pipeline.run(question.question, k=args.k, modality=args.modality) as run:
            response = AnswerResponse.from_result(run.wait())
        said = response.answer_without_markers
        cited = [citation.source_id for citation in response.citations]
        keyword = question.keywords or ""
        has_keyword = re.search(rf"\b{re.escape(keyword.lower())}\b", said.lower()) is not None
        rows.append(
            {
                "question": question.question,
                "split": question.split,
                "gold_image": sorted(gold),
                "keywords": keyword,
                "gold_rank": ranks[0] if ranks else None,
                "answer": said,
                "cited": cited,
                "abstained": response.abstained,
                "has_keywords": has_keyword,
                "cites_gold": bool(gold & set(cited)),
                "answered": has_keyword and bool(gold & set(cited)) and not response.abstained,
            }
        )
    accuracies = keyword_accuracies(
        [row["answer"] for row in rows],
        [row["keywords"] for row in rows],
        [question.qcate for question in questions],
    )
    for row, accuracy in zip(rows, accuracies, strict=True):
        row["webqa_acc"] = round(accuracy * 100, 1)

    def counts(selected: list[dict]) -> dict:
        n = len(selected)
        return {
            "questions": n,
            "gold_image_first": sum(row["gold_rank"] == 1 for row in selected),
            "gold_image_in_top10": sum(row["gold_rank"] is not None for row in selected),
            "answered_and_cited": sum(row["answered"] for row in selected),
            "has_keywords": sum(row["has_keywords"] for row in selected),
            "cites_gold": sum(row["cites_gold"] for row in selected),
            "declined": sum(row["abstained"] for row in selected),
            "webqa_acc": round(statistics.fmean(row["webqa_acc"] for row in selected), 2),
        }

    return {
        "all": counts(rows),
        "val": counts([row for row in rows if row["split"] == "val"]),
        "questions": rows,
    }


# --- main ----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--throughput-images", type=int, default=100)
    parser.add_argument("--photos", type=int, default=2000, help="photos of the build corpus")
    parser.add_argument(
        "--max-ocr-minutes",
        type=float,
        default=25,
        help="longest OCR build of --photos to run; past it, fewer photos, scaled linearly",
    )
    parser.add_argument("--repeats", type=int, default=2, help="builds of the sample each way")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results: dict = {
        "machine": {
            "name": "dev-2core",
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "load_average_at_start": [round(value, 2) for value in os.getloadavg()],
            "gpu": "none (every build and read on the CPU)",
        },
        "text_embedder": "packaged all-MiniLM-L6-v2 (the default), in every build",
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        photos, questions = draw_photos(work / "scene", max(args.photos, args.throughput_images))
        results["photos_drawn_s"] = round(time.perf_counter() - started, 1)

        results["ocr_throughput"] = ocr_throughput(photos[: args.throughput_images], questions)
        print(json.dumps({"ocr_throughput": results["ocr_throughput"]}), file=sys.stderr)

        sample = ["--corpus", str(SAMPLE_JSON), "--images", str(SAMPLE / "imgs.tsv")]
        for ocr in (False, True):
            label = "with_ocr" if ocr else "without_ocr"
            index = work / f"sample-{label}"
            runs = [build(sample, index, ocr) for _ in range(args.repeats)]
            figures = pair(runs)
            figures["calibrate_s"] = calibrate(index)
            if not args.skip_quality:
                figures["street_signs"] = street_sign_quality(index)
            results[f"sample_{label}"] = figures
            print(json.dumps({f"sample_{label}": figures["runs"]}), file=sys.stderr)

        rate = results["ocr_throughput"]["build_default"]["images_per_s"]
        measured = args.photos
        if args.photos / rate > args.max_ocr_minutes * 60:
            measured = int(args.max_ocr_minutes * 60 * rate * 0.8)
        flags = photo_corpus(work / "corpus", photos[:measured], questions)
        scale = args.photos / measured
        for ocr in (False, True):
            label = "with_ocr" if ocr else "without_ocr"
            figures = build(flags, work / f"photos-{label}", ocr)
            if scale != 1:
                figures["extrapolated"] = f"measured on {measured} photos, scaled x{scale:.2f}"
                figures["measured_wall_s"] = figures["wall_s"]
                figures["wall_s"] = round(figures["wall_s"] * scale, 1)
            results[f"photos_{args.photos}_{label}"] = figures
            print(json.dumps({f"photos_{label}": figures}), file=sys.stderr)
        with_ocr = results[f"photos_{args.photos}_with_ocr"]
        results["webqa_release_estimate"] = {
            "images": WEBQA_IMAGES,
            "ocr_images_per_s": with_ocr.get("ocr_images_per_s"),
            "ocr_hours_on_these_cores": round(
                WEBQA_IMAGES / with_ocr["ocr_images_per_s"] / 3600, 1
            ),
            "note": "linear in images at the rate of the scene-text photos; WebQA's photos differ "
            "in size and in how much text they hold",
        }
    results["load_average_at_end"] = [round(value, 2) for value in os.getloadavg()]
    write_report(results, args.out)


if __name__ == "__main__":
    main()
