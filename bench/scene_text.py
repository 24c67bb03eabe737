"""A scene-text VQA set in ST-VQA's release format, drawn procedurally, for measuring answers.

No ST-VQA images can be fetched here, so signs, shop fronts, buses and price boards are drawn
with several DejaVu faces (matplotlib's), coloured boards on noisy backgrounds, tilted a little
and saved as JPEG. Each image holds two to four pieces of text and each question asks for one
of them by its role ("What is the phone number?"), so an answer must be picked out of the text
read, as in ST-VQA, where most answers are copied from the scene. Fully determined by --seed.

Usage: python -m bench.scene_text --out DIR [--images 60] [--seed 0]
writes DIR/ST-VQA_synthetic.json ({"data": [...]}) and DIR/images/*.jpg.
"""

from __future__ import annotations

import argparse
import io
import json
import random
from pathlib import Path

import matplotlib
from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONTS = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
FACES = ("DejaVuSans-Bold.ttf", "DejaVuSans.ttf", "DejaVuSerif-Bold.ttf", "DejaVuSansMono-Bold.ttf")
WIDTH, HEIGHT = 640, 420
BOARDS = [
    (250, 250, 245),
    (250, 215, 40),
    (30, 70, 160),
    (20, 110, 60),
    (170, 30, 30),
    (25, 25, 25),
]
NAMES = ["MAPLE", "HARBOUR", "CROWN", "GOLDEN", "RIVERSIDE", "OAK", "STAR", "NORTH", "BRIDGE"]
SHOPS = ["BAKERY", "BOOKS", "PHARMACY", "CAFE", "FLORIST", "BUTCHER", "GARAGE", "DELI"]
PLACES = ["CITY CENTRE", "AIRPORT", "HOSPITAL", "UNIVERSITY", "HARBOUR", "STATION"]
STREETS = ["HIGH STREET", "MILL LANE", "STATION ROAD", "CHURCH STREET", "PARK AVENUE"]
WARNINGS = ["HIGH VOLTAGE", "DEEP WATER", "FALLING ROCKS", "WET FLOOR", "GUARD DOGS"]
DRINKS = ["TEA", "COFFEE", "COCOA", "JUICE"]
DAYS = ["MONDAY", "TUESDAY", "FRIDAY", "SATURDAY", "SUNDAY"]


def scene(rng: random.Random) -> tuple[list[str], list[tuple[str, str]]]:
    """(lines painted, [(question, answer)]) for one image."""
    kind = rng.choice(["shop", "bus", "street", "warning", "prices", "door", "market"])
    if kind == "shop":
        name, phone = (
            f"{rng.choice(NAMES)} {rng.choice(SHOPS)}",
            f"0{rng.randint(1000, 9999)} {rng.randint(100000, 999999)}",
        )
        return [name, "OPEN DAILY", phone], [
            ("What is the name of the shop?", name),
            ("What is the phone number on the sign?", phone),
        ]
    if kind == "bus":
        number, place = str(rng.randint(2, 199)), rng.choice(PLACES)
        return [number, place], [
            ("What number is the bus?", number),
            ("Where is the bus going?", place),
        ]
    if kind == "street":
        street = rng.choice(STREETS)
        return [street, f"NO {rng.choice(['PARKING', 'ENTRY', 'CYCLING'])}"], [
            ("What street is this?", street)
        ]
    if kind == "warning":
        warning = rng.choice(WARNINGS)
        return ["DANGER", warning], [("What does the sign warn of?", warning)]
    if kind == "prices":
        drinks = rng.sample(DRINKS, 2)
        prices = [f"{rng.randint(1, 4)}.{rng.choice(['20', '50', '80', '95'])}" for _ in drinks]
        asked = rng.randrange(2)
        return [f"{d} {p}" for d, p in zip(drinks, prices, strict=True)], [
            (f"How much does the {drinks[asked].lower()} cost?", prices[asked])
        ]
    if kind == "door":
        number = str(rng.randint(1, 240))
        return [number, "NO JUNK MAIL"], [("What is the house number?", number)]
    day, name = rng.choice(DAYS), rng.choice(NAMES)
    return [f"{name} MARKET", f"EVERY {day}"], [
        ("On which day is the market?", day),
        ("What is the market called?", f"{name} MARKET"),
    ]


def paint(lines: list[str], rng: random.Random) -> bytes:
    image = Image.new("RGB", (WIDTH, HEIGHT), tuple(rng.randint(60, 200) for _ in range(3)))
    draw = ImageDraw.Draw(image)
    for _ in range(12):  # clutter
        x, y = rng.randint(0, WIDTH), rng.randint(0, HEIGHT)
        draw.rectangle((x, y, x + rng.randint(20, 160), y + rng.randint(20, 120)),
                       fill=tuple(rng.randint(0, 255) for _ in range(3)))  # fmt: skip
    board = rng.choice(BOARDS)
    ink = (20, 20, 20) if sum(board) > 400 else (245, 245, 245)
    font = ImageFont.truetype(str(FONTS / rng.choice(FACES)), rng.randint(30, 44))
    sign = Image.new("RGB", (520, 70 * len(lines) + 40), board)
    sign_draw = ImageDraw.Draw(sign)
    for number, line in enumerate(lines):
        words, x = line.split(), 30.0
        for word in words:
            sign_draw.text((x, 30 + 70 * number), word, fill=ink, font=font)
            x += sign_draw.textlength(word, font=font) + font.size * 0.6
    sign = sign.rotate(rng.uniform(-4, 4), expand=True, fillcolor=board)
    image.paste(sign, ((WIDTH - sign.width) // 2, (HEIGHT - sign.height) // 2))
    image = image.filter(ImageFilter.GaussianBlur(rng.uniform(0, 0.8)))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=rng.randint(70, 90))
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--images", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    (args.out / "images").mkdir(parents=True, exist_ok=True)
    data, question_id = [], 0
    for number in range(args.images):
        lines, questions = scene(rng)
        name = f"images/scene_{number:04d}.jpg"
        (args.out / name).write_bytes(paint(lines, rng))
        for question, answer in questions:
            question_id += 1
            data.append({"question_id": question_id, "question": question,
                         "answers": [answer.lower()], "file_path": name,
                         "set_name": "synthetic", "dataset": "mmrag scene text"})  # fmt: skip
    path = args.out / "ST-VQA_synthetic.json"
    path.write_text(json.dumps({"data": data}, indent=1) + "\n")
    print(f"{path}: {len(data)} questions on {args.images} images")


if __name__ == "__main__":
    main()
