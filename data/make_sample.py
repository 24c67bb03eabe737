"""Generate the small WebQA-format sample corpus shipped in data/sample/.

The real WebQA release (a JSON of questions plus a ~51 GB imgs.tsv) is far too large for tests
and demos, so this script invents a small, self-consistent fictional world (six towns
with their inns, shops, flags, towers, parks, festivals, churches, bridges and boats) and writes
it in exactly the release format: `WebQA_sample.json`, `imgs.tsv` and `imgs.lineidx`.

Every image is drawn procedurally with Pillow from the same attributes that the captions and
answers are written from, so each answer is true in the pixels as well as in the text. One image
is deliberately truncated, as some real WebQA JPEGs are. Output is byte-identical across runs
(seeded RNG, fixed iteration order) on the same Pillow/libjpeg build.

Usage: python data/make_sample.py [--out DIR]
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import io
import json
import math
import random
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar
from urllib.parse import quote

from PIL import Image, ImageDraw, ImageFont

SEED = 2026
WIDTH, HEIGHT = 192, 144
JPEG_QUALITY = 85
IMAGE_ID_BASE = 30_000_000
TRUNCATE_FRACTION = 0.6
MIN_NEGATIVES, MAX_NEGATIVES = 5, 12
QUOTE_Q_RATE, QUOTE_A_RATE = 0.8, 0.7
TRAIN_EVERY = 5  # every fifth question is "train", the rest "val"
QCATES = ("text", "YesNo", "Others", "choose", "number", "color", "shape")

Color = tuple[int, int, int]
Point = tuple[float, float]
Painter = Callable[[ImageDraw.ImageDraw], None]
Record = dict[str, Any]  # one question of the release JSON

COLORS: dict[str, Color] = {
    "red": (205, 35, 35),
    "blue": (35, 75, 200),
    "green": (40, 150, 60),
    "yellow": (245, 210, 35),
    "orange": (240, 135, 25),
    "purple": (125, 50, 165),
    "white": (248, 248, 248),
    "black": (25, 25, 25),
    "pink": (240, 150, 190),
    "grey": (150, 150, 150),
    "brown": (125, 80, 40),
}
WALLS: dict[str, Color] = {
    "cream": (238, 228, 198),
    "stone": (186, 180, 168),
    "white": (250, 250, 246),
    "brick": (160, 82, 60),
}
SKY: Color = (172, 206, 236)
GRASS: Color = (96, 160, 74)
WATER: Color = (64, 124, 196)
NIGHT: Color = (24, 30, 62)
SOIL: Color = (110, 76, 44)
GLASS: Color = (170, 200, 225)
PARCHMENT: Color = (235, 225, 200)
OUTLINE: Color = (40, 40, 40)

NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
SHAPE_ADJECTIVES = {"oval": "oval", "rectangle": "rectangular", "square": "square"}


# --------------------------------------------------------------------------- the fictional world


class Town(NamedTuple):
    name: str
    river: str
    setting: str
    industry: str


class Building(NamedTuple):
    name: str
    kind: str
    town: str
    wall: str
    door: str
    number: int
    windows: int


class Shop(NamedTuple):
    name: str
    kind: str
    town: str
    sign: str
    ink: str
    word: str
    awning: str
    product: str


class Region(NamedTuple):
    name: str
    field: str
    shape: str
    emblem: str
    count: int
    capital: str
    economy: str


class Crest(NamedTuple):
    town: str
    shield: str
    shape: str
    emblem: str


class Tower(NamedTuple):
    name: str
    kind: str
    town: str
    height: int
    body: str
    stripe: str
    stripes: int


class Park(NamedTuple):
    name: str
    town: str
    pond: str
    ducks: int
    bed: str
    flowers: str


class Display(NamedTuple):
    item: str
    color: str
    count: int


class Festival(NamedTuple):
    name: str
    town: str
    month: str
    displays: tuple[Display, ...]
    highlight: str


class Chapel(NamedTuple):
    name: str
    town: str
    window: str
    glass: str
    saint: str


class Bridge(NamedTuple):
    name: str
    town: str
    river: str
    arches: int
    color: str


class Boat(NamedTuple):
    name: str
    port: str
    hull: str
    sail: str
    catch: str


TOWNS = (
    Town("Dunmore", "River Dun", "harbour", "fishing and shipbuilding"),
    Town("Kestrel Bay", "River Kestrel", "harbour", "fishing and seaside tourism"),
    Town("Alder Vale", "River Alder", "market", "wool and flour milling"),
    Town("Marrow Point", "River Marrow", "harbour", "salt making and oyster farming"),
    Town("Greywick", "River Grey", "market", "slate quarrying and printing"),
    Town("Salt Hollow", "River Sallow", "harbour", "salt panning and inshore fishing"),
)
BUILDINGS = (
    Building("Harbor Inn", "inn", "Dunmore", "cream", "blue", 12, 4),
    Building("Gull Tavern", "tavern", "Dunmore", "stone", "green", 7, 3),
    Building("Anchor Hotel", "hotel", "Kestrel Bay", "white", "red", 21, 6),
    Building("Copper Kettle Inn", "inn", "Alder Vale", "brick", "yellow", 3, 2),
    Building("Old Mill Inn", "inn", "Alder Vale", "stone", "black", 45, 5),
    Building("Fox and Hound Tavern", "tavern", "Greywick", "cream", "red", 9, 3),
    Building("Crown Inn", "inn", "Greywick", "brick", "purple", 18, 4),
    Building("Wayfarer's Rest", "inn", "Salt Hollow", "white", "orange", 5, 2),
    Building("Heron Lodge", "hotel", "Marrow Point", "brick", "white", 31, 6),
    Building("Thistle Inn", "inn", "Marrow Point", "stone", "green", 14, 1),
    Building("Kingfisher Hotel", "hotel", "Kestrel Bay", "cream", "blue", 27, 5),
    Building("Harbor View Hotel", "hotel", "Salt Hollow", "brick", "yellow", 8, 3),
)
SHOPS = (
    Shop("Lantern Bakery", "bakery", "Dunmore", "yellow", "black", "BREAD", "red", "rye loaves"),
    Shop("Quill Bookshop", "bookshop", "Greywick", "green", "white", "BOOKS", "blue", "maps"),
    Shop("Moonlight Cafe", "cafe", "Kestrel Bay", "purple", "white", "CAFE", "yellow", "pastries"),
    Shop("Pepper Mill Grocer", "grocer", "Alder Vale", "red", "white", "SPICE", "green", "cheese"),
    Shop(
        "Tidewater Pharmacy",
        "pharmacy",
        "Salt Hollow",
        "white",
        "green",
        "CHEMIST",
        "blue",
        "herbal remedies",
    ),
    Shop(
        "Bramble Florist",
        "florist",
        "Marrow Point",
        "pink",
        "black",
        "FLOWERS",
        "purple",
        "wedding bouquets",
    ),
    Shop("Iron Anvil Forge", "forge", "Greywick", "black", "orange", "FORGE", "red", "gate hinges"),
    Shop(
        "Saltwind Fishmonger",
        "fishmonger",
        "Dunmore",
        "blue",
        "white",
        "FISH",
        "green",
        "smoked mackerel",
    ),
    Shop("Harbor Cafe", "cafe", "Dunmore", "orange", "black", "COFFEE", "orange", "crab rolls"),
    Shop("Kettle Tea Rooms", "tea room", "Alder Vale", "green", "yellow", "TEA", "pink", "scones"),
    Shop(
        "Greywick Post Office",
        "post office",
        "Greywick",
        "red",
        "yellow",
        "POST",
        "red",
        "postcards",
    ),
    Shop(
        "Driftwood Gallery",
        "gallery",
        "Kestrel Bay",
        "white",
        "blue",
        "ART",
        "black",
        "seascape paintings",
    ),
)
REGIONS = (
    Region("Veloria", "blue", "star", "yellow", 3, "Velmont", "fishing and shipbuilding"),
    Region("Sarnia", "red", "circle", "white", 1, "Sarnholt", "wine and olive oil"),
    Region("Ostmark", "green", "triangle", "white", 2, "Ostby", "forestry and paper mills"),
    Region("the Calder Isles", "white", "heart", "red", 1, "Port Calder", "tourism and ferries"),
    Region("Brevanne", "yellow", "square", "black", 4, "Brevanne City", "wheat and barley"),
    Region("Tollund", "purple", "star", "white", 5, "Tollhaven", "copper mining"),
    Region("Myrrhen", "black", "circle", "orange", 2, "Myrrhenburg", "textiles and dyeing"),
    Region("Estival", "orange", "diamond", "blue", 1, "Estia", "citrus orchards"),
    Region("Korvath", "blue", "circle", "white", 6, "Korv", "shipping and trade"),
    Region("Lunden Reach", "green", "star", "red", 1, "Lundenmouth", "dairy farming"),
)
CRESTS = (
    Crest("Dunmore", "blue", "circle", "white"),
    Crest("Kestrel Bay", "red", "diamond", "yellow"),
    Crest("Alder Vale", "green", "heart", "white"),
    Crest("Marrow Point", "black", "triangle", "yellow"),
    Crest("Greywick", "purple", "star", "yellow"),
    Crest("Salt Hollow", "white", "square", "blue"),
)
TOWERS = (
    Tower("Aldric Tower", "tower", "Dunmore", 48, "grey", "", 0),
    Tower("Brennan Tower", "tower", "Greywick", 36, "red", "", 0),
    Tower("Kestrel Point Lighthouse", "lighthouse", "Kestrel Bay", 30, "white", "red", 3),
    Tower("Greywick Clock Tower", "clock tower", "Greywick", 42, "yellow", "", 0),
    Tower("Salt Hollow Lighthouse", "lighthouse", "Salt Hollow", 24, "white", "black", 2),
    Tower("Marrow Point Lighthouse", "lighthouse", "Marrow Point", 38, "white", "blue", 4),
    Tower("St. Orla Bell Tower", "tower", "Dunmore", 40, "white", "", 0),
    Tower("Vale Water Tower", "water tower", "Alder Vale", 28, "green", "", 0),
)
PARKS = (
    Park("Kell Park", "Dunmore", "heart", 3, "star", "red"),
    Park("Willow Gardens", "Alder Vale", "circle", 5, "heart", "yellow"),
    Park("Heron Common", "Marrow Point", "square", 2, "circle", "purple"),
    Park("Alder Park", "Alder Vale", "oval", 4, "triangle", "orange"),
    Park("Queen Maud Gardens", "Kestrel Bay", "triangle", 1, "diamond", "pink"),
    Park("Millbrook Green", "Greywick", "circle", 6, "square", "white"),
    Park("Lark Meadow Park", "Salt Hollow", "heart", 2, "star", "blue"),
    Park("Fennick Square", "Greywick", "rectangle", 4, "circle", "red"),
)
FESTIVALS = (
    Festival(
        "Alder Vale Spring Fair",
        "Alder Vale",
        "April",
        (Display("balloons", "red", 4), Display("bunting", "green", 5)),
        "a sheepdog trial and a cake competition",
    ),
    Festival(
        "Dunmore Harbor Festival",
        "Dunmore",
        "July",
        (Display("balloons", "blue", 6), Display("bunting", "red", 6)),
        "a rowing race across the harbour and a fish supper on the quay",
    ),
    Festival(
        "Kestrel Bay Kite Festival",
        "Kestrel Bay",
        "August",
        (Display("kites", "orange", 3), Display("balloons", "yellow", 2)),
        "a kite-making workshop and a night flight with lit kites",
    ),
    Festival(
        "Greywick Lantern Night",
        "Greywick",
        "November",
        (Display("lanterns", "yellow", 4), Display("bunting", "purple", 3)),
        "a torchlit procession from the abbey to the market square",
    ),
    Festival(
        "Salt Hollow Regatta",
        "Salt Hollow",
        "June",
        (Display("bunting", "blue", 5), Display("balloons", "white", 3)),
        "sailing races for fishing boats and a swimming race in the harbour",
    ),
    Festival(
        "Marrow Point Harvest Fair",
        "Marrow Point",
        "September",
        (Display("balloons", "green", 2), Display("lanterns", "orange", 5)),
        "an oyster-shucking contest and a ploughing match",
    ),
)
CHAPELS = (
    Chapel("Chapel of St. Orla", "Dunmore", "circle", "blue", "St. Orla of the Sea"),
    Chapel("St. Brigid's Church", "Kestrel Bay", "triangle", "red", "St. Brigid"),
    Chapel("Chapel of St. Aidan", "Alder Vale", "star", "yellow", "St. Aidan"),
    Chapel("Greywick Abbey", "Greywick", "square", "green", "St. Benedict"),
    Chapel("Church of St. Columba", "Salt Hollow", "diamond", "purple", "St. Columba"),
    Chapel("Marrow Point Chapel", "Marrow Point", "heart", "orange", "St. Ninian"),
)
BRIDGES = (
    Bridge("Kell Bridge", "Dunmore", "River Dun", 3, "grey"),
    Bridge("Alder Bridge", "Alder Vale", "River Alder", 5, "white"),
    Bridge("Tollgate Bridge", "Greywick", "River Grey", 2, "red"),
    Bridge("Mill Bridge", "Alder Vale", "River Alder", 4, "black"),
    Bridge("Heron Bridge", "Marrow Point", "River Marrow", 1, "green"),
)
BOATS = (
    Boat("Maribel", "Dunmore", "red", "white", "herring"),
    Boat("Sea Lark", "Kestrel Bay", "blue", "yellow", "mackerel"),
    Boat("Osprey", "Salt Hollow", "green", "white", "crab and lobster"),
    Boat("Gannet", "Marrow Point", "black", "red", "cod"),
    Boat("Little Wren", "Dunmore", "yellow", "blue", "sprats"),
    Boat("Storm Petrel", "Salt Hollow", "white", "orange", "plaice"),
)

FIRST_NAMES = (
    "Tomas",
    "Elena",
    "Marguerite",
    "Oswin",
    "Ada",
    "Rowan",
    "Isolde",
    "Callum",
    "Brigid",
    "Edmund",
    "Hester",
    "Lorcan",
    "Maud",
    "Piers",
    "Sabine",
    "Ivo",
    "Nessa",
    "Cormac",
    "Wilhelmina",
    "Declan",
)
SURNAMES = (
    "Ashby",
    "Fenwick",
    "Corrigan",
    "Halloran",
    "Pryce",
    "Devereux",
    "Lindqvist",
    "Oakes",
    "Tremayne",
    "Voss",
    "Whitcombe",
    "Quayle",
    "Brannock",
    "Sutter",
    "Mallory",
    "Penhallow",
)
STREETS = (
    "Quay Street",
    "Mill Lane",
    "Market Square",
    "Church Row",
    "Harbor Road",
    "Bridge Street",
    "Tanner's Walk",
    "High Street",
    "Chapel Hill",
    "Ropewalk",
)
PROFESSIONS = ("shipwright", "brewer", "merchant", "stonemason", "sea captain", "wool trader")


# --------------------------------------------------------------------------- drawing primitives


@functools.cache
def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    """Pillow's bundled font, so no system font (which differs per machine) is ever needed."""
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ImportError, OSError):  # Pillow < 10.1 or no FreeType: small bitmap font
        return ImageFont.load_default()


def _text(
    draw: ImageDraw.ImageDraw,
    center: Point,
    text: str,
    size: int,
    fill: Color,
    max_width: float = 1e9,
) -> None:
    """Centre text on a point, shrinking the font until it fits the width given."""
    while size > 8 and draw.textlength(text, font=_font(size)) > max_width:
        size -= 1
    draw.text(center, text, fill=fill, font=_font(size), anchor="mm")


def _regular_polygon(cx: float, cy: float, r: float, sides: int) -> list[Point]:
    return [
        (
            cx + r * math.cos(math.radians(-90 + 360 * i / sides)),
            cy + r * math.sin(math.radians(-90 + 360 * i / sides)),
        )
        for i in range(sides)
    ]


def _star(cx: float, cy: float, r: float) -> list[Point]:
    points = []
    for i in range(10):
        radius = r if i % 2 == 0 else r * 0.45
        angle = math.radians(-90 + 36 * i)
        points.append((cx + radius * math.cos(angle), cy + radius * math.sin(angle)))
    return points


def _heart(cx: float, cy: float, r: float) -> list[Point]:
    """The classic parametric heart, scaled so its bounding box is about 2r wide."""
    points = []
    for i in range(72):
        t = 2 * math.pi * i / 72
        x = 16 * math.sin(t) ** 3
        y = -(13 * math.cos(t) - 5 * math.cos(2 * t) - 2 * math.cos(3 * t) - math.cos(4 * t))
        points.append((cx + x * r / 17, cy + (y - 2.5) * r / 17))
    return points


def _shape_outline(shape: str, cx: float, cy: float, r: float) -> list[Point] | None:
    """Polygon vertices of a named shape, or None for the ellipse-based ones."""
    polygons: dict[str, Callable[[], list[Point]]] = {
        "square": lambda: [
            (cx - 0.85 * r, cy - 0.85 * r),
            (cx + 0.85 * r, cy - 0.85 * r),
            (cx + 0.85 * r, cy + 0.85 * r),
            (cx - 0.85 * r, cy + 0.85 * r),
        ],
        "rectangle": lambda: [
            (cx - 1.3 * r, cy - 0.7 * r),
            (cx + 1.3 * r, cy - 0.7 * r),
            (cx + 1.3 * r, cy + 0.7 * r),
            (cx - 1.3 * r, cy + 0.7 * r),
        ],
        "triangle": lambda: _regular_polygon(cx, cy + 0.25 * r, r, 3),
        "diamond": lambda: [(cx, cy - r), (cx + 0.7 * r, cy), (cx, cy + r), (cx - 0.7 * r, cy)],
        "star": lambda: _star(cx, cy, r),
        "heart": lambda: _heart(cx, cy, r),
    }
    return polygons[shape]() if shape in polygons else None


def draw_shape(
    draw: ImageDraw.ImageDraw,
    shape: str,
    center: Point,
    r: float,
    fill: Color | int,
    outline: Color | int = OUTLINE,
    width: int = 2,
) -> None:
    """Draw a named shape centred on a point; ints are grey levels, for drawing masks."""
    cx, cy = center
    if shape == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=fill, outline=outline, width=width)
    elif shape == "oval":
        box = (cx - 1.35 * r, cy - 0.8 * r, cx + 1.35 * r, cy + 0.8 * r)
        draw.ellipse(box, fill=fill, outline=outline, width=width)
    else:
        points = _shape_outline(shape, cx, cy, r)
        assert points is not None, shape
        draw.polygon(points, fill=fill, outline=outline, width=width)


def _background(draw: ImageDraw.ImageDraw, color: Color) -> None:
    draw.rectangle((0, 0, WIDTH, HEIGHT), fill=color)


def _darker(color: Color, factor: float = 0.6) -> Color:
    return (int(color[0] * factor), int(color[1] * factor), int(color[2] * factor))


def _row(count: int, left: float, right: float) -> list[float]:
    """Evenly spaced centres of `count` items across [left, right]."""
    step = (right - left) / count
    return [left + step * (i + 0.5) for i in range(count)]


# --------------------------------------------------------------------------- scene painters


def paint_door(draw: ImageDraw.ImageDraw, wall: str, door: str, number: int) -> None:
    _background(draw, WALLS[wall])
    draw.rectangle((0, 134, WIDTH, HEIGHT), fill=(120, 120, 120))
    for x0 in (18, 136):
        draw.rectangle((x0, 52, x0 + 38, 100), fill=GLASS, outline=(250, 250, 250), width=3)
        draw.line((x0 + 19, 52, x0 + 19, 100), fill=(250, 250, 250), width=2)
    color = COLORS[door]
    draw.rectangle((74, 50, 118, 134), fill=color, outline=OUTLINE, width=2)
    panel = _darker(color, 0.75) if door != "black" else (60, 60, 60)
    draw.rectangle((80, 58, 112, 88), outline=panel, width=2)
    draw.rectangle((80, 96, 112, 128), outline=panel, width=2)
    draw.ellipse((106, 89, 112, 95), fill=(200, 170, 60), outline=OUTLINE)
    draw.rectangle((80, 26, 112, 44), fill=COLORS["white"], outline=OUTLINE, width=2)
    _text(draw, (96, 35), str(number), 14, COLORS["black"], max_width=28)


def paint_upper_floor(draw: ImageDraw.ImageDraw, wall: str, windows: int) -> None:
    _background(draw, WALLS[wall])
    draw.polygon([(0, 0), (WIDTH, 0), (WIDTH, 24), (0, 30)], fill=(110, 48, 40))
    draw.line((0, 30, WIDTH, 24), fill=OUTLINE, width=3)
    draw.line((0, 118, WIDTH, 118), fill=_darker(WALLS[wall], 0.8), width=4)
    for cx in _row(windows, 0, WIDTH):
        draw.rectangle((cx - 10, 48, cx + 10, 84), fill=GLASS, outline=(252, 252, 252), width=3)
        draw.line((cx - 10, 66, cx + 10, 66), fill=(252, 252, 252), width=2)
        draw.rectangle((cx - 13, 84, cx + 13, 88), fill=(215, 215, 210), outline=OUTLINE)


def paint_sign(draw: ImageDraw.ImageDraw, sign: str, ink: str, word: str) -> None:
    _background(draw, WALLS["stone"])
    draw.line((6, 24, 186, 24), fill=OUTLINE, width=4)
    for x in (48, 144):
        draw.line((x, 24, x, 40), fill=OUTLINE, width=2)
    draw.rectangle((22, 40, 170, 102), fill=COLORS[sign], outline=OUTLINE, width=3)
    _text(draw, (96, 71), word, 28, COLORS[ink], max_width=132)


def paint_awning(draw: ImageDraw.ImageDraw, stripe: str) -> None:
    _background(draw, WALLS["cream"])
    draw.rectangle((24, 74, 168, 132), fill=GLASS, outline=(90, 60, 40), width=4)
    stripes = 9
    for i in range(stripes):
        top_left, top_right = 14 + i * 164 / stripes, 14 + (i + 1) * 164 / stripes
        bottom_left, bottom_right = 4 + i * 184 / stripes, 4 + (i + 1) * 184 / stripes
        color = COLORS[stripe] if i % 2 == 0 else COLORS["white"]
        draw.polygon(
            [(top_left, 28), (top_right, 28), (bottom_right, 62), (bottom_left, 62)], fill=color
        )
    draw.polygon([(14, 28), (178, 28), (188, 62), (4, 62)], outline=OUTLINE, width=2)


def paint_flag(
    draw: ImageDraw.ImageDraw, field_color: str, shape: str, emblem: str, count: int
) -> None:
    _background(draw, SKY)
    draw.rectangle((26, 8, 31, 140), fill=(110, 110, 110))
    draw.rectangle((31, 14, 176, 100), fill=COLORS[field_color], outline=(90, 90, 90), width=1)
    spacing = 145 / count
    radius = min(26.0, spacing * 0.36)
    for cx in _row(count, 31, 176):
        draw_shape(draw, shape, (cx, 57), radius, COLORS[emblem], outline=COLORS[emblem])


def paint_crest(draw: ImageDraw.ImageDraw, shield: str, shape: str, emblem: str) -> None:
    _background(draw, PARCHMENT)
    outline = [(46.0, 14.0), (146.0, 14.0)]
    outline += [
        (96 + 50 * math.cos(math.radians(a)), 74 + 58 * math.sin(math.radians(a)))
        for a in range(0, 181, 10)
    ]
    draw.polygon(outline, fill=COLORS[shield], outline=OUTLINE, width=3)
    draw_shape(draw, shape, (96, 62), 26, COLORS[emblem])


def _lighthouse(
    draw: ImageDraw.ImageDraw, top: float, body: Color, stripe: Color, stripes: int
) -> None:
    base, shoulder = 128.0, top + 14

    def x_at(y: float) -> tuple[float, float]:
        inset = 6 * (base - y) / (base - shoulder)
        return 80 + inset, 112 - inset

    draw.polygon(
        [(80, base), (112, base), (106, shoulder), (86, shoulder)],
        fill=body,
        outline=(110, 110, 110),
    )
    band = (base - shoulder) / (2 * stripes + 1)
    for i in range(stripes):
        y0, y1 = shoulder + band * (2 * i + 1), shoulder + band * (2 * i + 2)
        (l0, r0), (l1, r1) = x_at(y0), x_at(y1)
        draw.polygon([(l0, y0), (r0, y0), (r1, y1), (l1, y1)], fill=stripe)
    draw.rectangle((88, top + 5, 104, shoulder), fill=(250, 220, 90), outline=OUTLINE)
    draw.polygon([(85, top + 5), (107, top + 5), (96, top - 2)], fill=OUTLINE)


def _water_tower(draw: ImageDraw.ImageDraw, top: float, body: Color) -> None:
    for x_foot, x_head in ((82, 88), (110, 104), (92, 93), (100, 99)):
        draw.line((x_foot, 128, x_head, top + 28), fill=(90, 90, 90), width=2)
    draw.rectangle((74, top + 4, 118, top + 30), fill=body, outline=OUTLINE, width=2)
    draw.polygon([(72, top + 4), (120, top + 4), (96, top - 4)], fill=(70, 70, 70))


def _stone_tower(draw: ImageDraw.ImageDraw, top: float, body: Color, clock: bool) -> None:
    draw.rectangle((82, top + 8, 110, 128), fill=body, outline=(90, 90, 90))
    for x in (82, 90, 98, 106):
        draw.rectangle((x, top, x + 4, top + 8), fill=body, outline=(90, 90, 90))
    for y in range(int(top) + 40, 120, 22):
        draw.rectangle((94, y, 98, y + 10), fill=(50, 50, 60))
    if clock:
        draw.ellipse((87, top + 14, 105, top + 32), fill=COLORS["white"], outline=OUTLINE, width=2)
        draw.line((96, top + 23, 96, top + 16), fill=OUTLINE, width=2)
        draw.line((96, top + 23, 101, top + 23), fill=OUTLINE, width=2)


def paint_tower(
    draw: ImageDraw.ImageDraw, kind: str, height: int, body: str, stripe: str, stripes: int
) -> None:
    """All towers share one scale (2 px per metre) so heights compare across images."""
    _background(draw, SKY)
    draw.rectangle((0, 128, WIDTH, HEIGHT), fill=GRASS)
    top = 128 - 2 * height
    if kind == "lighthouse":
        _lighthouse(draw, top, COLORS[body], COLORS[stripe], stripes)
    elif kind == "water tower":
        _water_tower(draw, top, COLORS[body])
    else:
        _stone_tower(draw, top, COLORS[body], clock=kind == "clock tower")


def _duck(draw: ImageDraw.ImageDraw, x: float, y: float) -> None:
    draw.ellipse((x - 6, y - 3, x + 6, y + 4), fill=COLORS["white"], outline=(90, 90, 90))
    draw.ellipse((x + 2, y - 8, x + 8, y - 2), fill=COLORS["white"], outline=(90, 90, 90))
    draw.polygon([(x + 8, y - 6), (x + 12, y - 5), (x + 8, y - 4)], fill=COLORS["orange"])


def paint_pond(draw: ImageDraw.ImageDraw, shape: str, ducks: int) -> None:
    _background(draw, GRASS)
    cy = 72.0
    draw_shape(draw, shape, (96, cy), 56, WATER, outline=(30, 70, 130), width=3)
    duck_cy = cy + (14 if shape == "triangle" else 0)
    cols = min(ducks, 3)
    rows = math.ceil(ducks / cols)
    for i in range(ducks):
        row, col = divmod(i, cols)
        in_row = cols if row < rows - 1 else ducks - cols * (rows - 1)
        x = 96 + (col - (in_row - 1) / 2) * 22
        y = duck_cy + (row - (rows - 1) / 2) * 18 + 3
        _duck(draw, x, y)


def paint_flower_bed(draw: ImageDraw.ImageDraw, shape: str, flowers: str) -> None:
    _background(draw, GRASS)
    draw_shape(draw, shape, (96, 72), 58, SOIL, outline=(80, 55, 30), width=3)
    mask = Image.new("L", (WIDTH, HEIGHT), 0)
    draw_shape(ImageDraw.Draw(mask), shape, (96, 72), 50, 255, outline=255, width=1)
    color = COLORS[flowers]
    for y in range(5, HEIGHT, 6):
        for x in range(3 + (y // 6) % 2 * 3, WIDTH, 6):
            if mask.getpixel((x, y)):
                draw.ellipse((x - 3, y - 3, x + 3, y + 3), fill=color)


def paint_balloons(draw: ImageDraw.ImageDraw, color: str, count: int) -> None:
    _background(draw, SKY)
    draw.rectangle((70, 124, 122, HEIGHT), fill=(150, 100, 60))
    for i, cx in enumerate(_row(count, 16, 176)):
        cy = 34 if i % 2 == 0 else 54
        draw.line((cx, cy + 15, 96, 124), fill=(60, 60, 60), width=1)
        draw.ellipse((cx - 12, cy - 15, cx + 12, cy + 15), fill=COLORS[color], outline=(90, 90, 90))
        draw.ellipse((cx - 7, cy - 10, cx - 3, cy - 4), fill=(252, 252, 252))


def paint_lanterns(draw: ImageDraw.ImageDraw, color: str, count: int) -> None:
    _background(draw, NIGHT)
    draw.line((0, 22, 96, 32, WIDTH, 22), fill=(120, 120, 120), width=2)
    for cx in _row(count, 8, 184):
        hang = 32 - 10 * abs(cx - 96) / 96
        draw.line((cx, hang, cx, 56), fill=(120, 120, 120), width=1)
        draw.ellipse((cx - 11, 56, cx + 11, 88), fill=COLORS[color])
        draw.rectangle((cx - 6, 53, cx + 6, 58), fill=(60, 60, 60))
        draw.rectangle((cx - 6, 86, cx + 6, 91), fill=(60, 60, 60))


def paint_kites(draw: ImageDraw.ImageDraw, color: str, count: int) -> None:
    _background(draw, SKY)
    draw.rectangle((0, 124, WIDTH, HEIGHT), fill=GRASS)
    for i, cx in enumerate(_row(count, 10, 182)):
        cy = 36 + 18 * (i % 2)
        draw.line((cx, cy + 18, 96, 130), fill=(70, 70, 70), width=1)
        draw_shape(draw, "diamond", (cx, cy), 18, COLORS[color])
        draw.line((cx, cy - 18, cx, cy + 18), fill=OUTLINE, width=1)
        draw.line((cx - 12.6, cy, cx + 12.6, cy), fill=OUTLINE, width=1)


def paint_bunting(draw: ImageDraw.ImageDraw, color: str, count: int) -> None:
    _background(draw, SKY)
    draw.rectangle((0, 110, WIDTH, HEIGHT), fill=WALLS["stone"])

    def sag(x: float) -> float:
        return 28 + 22 * (1 - ((x - 96) / 92) ** 2)

    draw.line([(x, sag(x)) for x in range(4, 189, 8)], fill=(70, 70, 70), width=2)
    for cx in _row(count, 8, 184):
        left, right = cx - 11, cx + 11
        draw.polygon(
            [(left, sag(left)), (right, sag(right)), (cx, sag(cx) + 30)],
            fill=COLORS[color],
            outline=(70, 70, 70),
        )


def paint_chapel_window(draw: ImageDraw.ImageDraw, shape: str, glass: str) -> None:
    _background(draw, SKY)
    draw.rectangle((0, 128, WIDTH, HEIGHT), fill=GRASS)
    draw.polygon(
        [(36, 128), (36, 46), (96, 10), (156, 46), (156, 128)],
        fill=WALLS["stone"],
        outline=(100, 100, 100),
    )
    draw_shape(draw, shape, (96, 60), 24, COLORS[glass], outline=OUTLINE, width=3)
    draw.rectangle((84, 104, 108, 128), fill=(100, 60, 30))
    draw.pieslice((84, 92, 108, 116), 180, 360, fill=(100, 60, 30))


def paint_bridge(draw: ImageDraw.ImageDraw, arches: int, color: str) -> None:
    _background(draw, SKY)
    draw.rectangle((0, 100, WIDTH, HEIGHT), fill=WATER)
    body = COLORS[color]
    draw.rectangle((8, 50, 184, 56), fill=_darker(body, 0.8) if color != "black" else (70, 70, 70))
    draw.rectangle((8, 56, 184, 100), fill=body, outline=(90, 90, 90))
    span = 176 / arches
    for i in range(arches):
        x0 = 8 + i * span
        draw.ellipse((x0 + 5, 72, x0 + span - 5, 128), fill=WATER, outline=(90, 90, 90))
    draw.rectangle((8, 100, 184, HEIGHT), fill=WATER)


def paint_boat(draw: ImageDraw.ImageDraw, hull: str, sail: str, name: str) -> None:
    _background(draw, SKY)
    draw.rectangle((0, 96, WIDTH, HEIGHT), fill=WATER)
    draw.line((96, 84, 96, 16), fill=(110, 70, 40), width=3)
    draw.polygon([(99, 18), (99, 80), (152, 80)], fill=COLORS[sail], outline=(90, 90, 90))
    draw.polygon([(93, 26), (93, 80), (56, 80)], fill=COLORS[sail], outline=(90, 90, 90))
    draw.polygon(
        [(26, 84), (166, 84), (148, 114), (44, 114)], fill=COLORS[hull], outline=OUTLINE, width=2
    )
    ink = COLORS["black"] if hull in ("white", "yellow") else COLORS["white"]
    _text(draw, (96, 98), name.upper(), 13, ink, max_width=100)


# --------------------------------------------------------------------------- sources


def _slug(title: str) -> str:
    return title.replace(" ", "_")


@dataclass
class ImageFact:
    image_id: int
    key: str
    title: str
    caption: str
    entity: str
    category: str
    town: str
    paint: Painter
    truncated: bool = False

    def record(self) -> dict[str, object]:
        """The img_*Facts entry, with Wikimedia-style page and file urls like the release's."""
        filename = f"{_slug(self.title)}.jpg"
        digest = hashlib.md5(filename.encode()).hexdigest()
        return {
            "image_id": self.image_id,
            "title": self.title,
            "caption": self.caption,
            "url": f"https://commons.wikimedia.org/wiki/File:{quote(filename)}",
            "imgUrl": f"https://upload.wikimedia.org/wikipedia/commons/{digest[0]}/{digest[:2]}/"
            f"{quote(filename)}",
        }

    def jpeg(self) -> bytes:
        image = Image.new("RGB", (WIDTH, HEIGHT), SKY)
        self.paint(ImageDraw.Draw(image))
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=JPEG_QUALITY)
        data = buffer.getvalue()
        return data[: int(len(data) * TRUNCATE_FRACTION)] if self.truncated else data


@dataclass
class TextFact:
    snippet_id: str
    key: str
    title: str
    fact: str
    entity: str
    aspect: str
    group: str
    town: str

    def record(self) -> dict[str, object]:
        return {
            "snippet_id": self.snippet_id,
            "title": self.title,
            "fact": self.fact,
            "url": f"https://en.wikipedia.org/wiki/{quote(_slug(self.title))}",
        }


class World:
    """All sources, looked up by a readable key such as 'door:Harbor Inn' or 'history:Harbor Inn'.

    Incidental facts (years, founders, ...) are drawn from the seeded RNG and kept in `facts`
    so that text questions can quote exactly what the snippets say.
    """

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.images: dict[str, ImageFact] = {}
        self.snippets: dict[str, TextFact] = {}
        self.facts: dict[str, dict[str, object]] = {}
        self.group: dict[str, str] = {}
        self.town: dict[str, str] = {}

    def entity(self, name: str, group: str, town: str) -> dict[str, object]:
        self.group[name] = group
        self.town[name] = town
        return self.facts.setdefault(name, {})

    def add_image(
        self, category: str, entity: str, title: str, caption: str, paint: Painter
    ) -> None:
        key = f"{category}:{entity}"
        assert key not in self.images, key
        image_id = IMAGE_ID_BASE + len(self.images)
        self.images[key] = ImageFact(
            image_id, key, title, caption, entity, category, self.town[entity], paint
        )

    def add_snippet(self, aspect: str, entity: str, fact: str, title: str | None = None) -> None:
        key = f"{aspect}:{entity}"
        assert key not in self.snippets, key
        snippet_id = f"{self.rng.getrandbits(128):032x}"
        self.snippets[key] = TextFact(
            snippet_id,
            key,
            title or _title(entity),
            fact,
            entity,
            aspect,
            self.group[entity],
            self.town[entity],
        )

    def person(self) -> str:
        return f"{self.rng.choice(FIRST_NAMES)} {self.rng.choice(SURNAMES)}"

    def year(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)


def _title(entity: str) -> str:
    """Page titles drop a leading article ('the Calder Isles' -> 'Calder Isles')."""
    return entity[4:] if entity.startswith("the ") else entity


def _the(name: str) -> str:
    """'the Chapel of St. Orla', but bare 'St. Brigid's Church' and 'Greywick Abbey'."""
    return name if name.startswith("St.") or name.endswith("Abbey") else f"the {name}"


def _cap(text: str) -> str:
    return text[0].upper() + text[1:]


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def _plural(word: str, count: int) -> str:
    if count == 1:
        return word
    return word + ("es" if word.endswith(("sh", "ch")) else "s")


def _shaped(shape: str) -> str:
    return SHAPE_ADJECTIVES.get(shape, f"{shape}-shaped")


def _counted(count: int, color: str, noun: str) -> str:
    """'a white circle' / 'three yellow stars'."""
    if count == 1:
        return f"{_a(color)} {noun}"
    return f"{NUMBER_WORDS[count]} {color} {_plural(noun, count)}"


# --------------------------------------------------------------------------- world builders


def build_towns(world: World) -> None:
    for town in TOWNS:
        facts = world.entity(town.name, "town", town.name)
        facts.update(population=world.rng.randint(2_000, 30_000), charter=world.year(1180, 1450))
        where = (
            "harbour town on the coast of the Sarn Sea"
            if town.setting == "harbour"
            else "market town in the green hills of the Sarn Valley"
        )
        world.add_snippet(
            "overview",
            town.name,
            f"{town.name} is a {where}. It has a population of "
            f"{facts['population']:,} and was granted a market charter in "
            f"{facts['charter']}.",
        )
        world.add_snippet(
            "economy",
            town.name,
            f"The {town.river} flows through {town.name}, whose economy has long "
            f"depended on {town.industry}. Its old town centre is a conservation "
            "area with many buildings from the eighteenth century.",
        )
    for river in ("River Dun", "River Alder", "River Grey", "River Marrow"):
        town = next(t for t in TOWNS if t.river == river)
        world.entity(river, "river", town.name)
        world.add_snippet(
            "course",
            river,
            f"The {river} rises in the Greywick Hills and flows for "
            f"{world.rng.randint(18, 70)} kilometres before reaching the Sarn Sea "
            f"near {town.name}. Salmon and sea trout run in it every autumn.",
        )


def build_crests(world: World) -> None:
    for crest in CRESTS:
        entity = f"Coat of arms of {crest.town}"
        world.entity(entity, "heraldry", crest.town)
        world.add_image(
            "crest",
            entity,
            entity,
            f"The coat of arms of {crest.town}, showing {_a(crest.emblem)} {crest.shape} on "
            f"{_a(crest.shield)} shield.",
            functools.partial(
                paint_crest, shield=crest.shield, shape=crest.shape, emblem=crest.emblem
            ),
        )
        world.add_snippet(
            "granted",
            entity,
            f"The coat of arms of {crest.town} was granted in "
            f"{world.year(1500, 1700)} by the provincial herald {world.person()}. "
            "It is carved above the door of the town hall and printed on the "
            "town's rubbish bins.",
        )


def build_buildings(world: World) -> None:
    for b in BUILDINGS:
        facts = world.entity(b.name, "lodging", b.town)
        facts.update(
            year=world.year(1760, 1910), founder=world.person(), rooms=world.rng.randint(6, 40)
        )
        world.add_image(
            "door",
            b.name,
            f"{b.door.capitalize()} Door of the {b.name}",
            f"A wooden door painted {b.door} at the {b.name} in {b.town}, with the house "
            f"number {b.number} on a plate above it.",
            functools.partial(paint_door, wall=b.wall, door=b.door, number=b.number),
        )
        world.add_image(
            "upper floor",
            b.name,
            f"Upper floor of the {b.name}",
            f"The upper floor of the {b.name} in {b.town}, with {NUMBER_WORDS[b.windows]} sash "
            f"{_plural('window', b.windows)} under the roof.",
            functools.partial(paint_upper_floor, wall=b.wall, windows=b.windows),
        )
        world.add_snippet(
            "history",
            b.name,
            f"The {b.name} is {_a(b.kind)} in {b.town}, built in {facts['year']} "
            f"by {facts['founder']}, a local {world.rng.choice(PROFESSIONS)}. "
            "It served travellers on the old coast road for more than a century.",
        )
        world.add_snippet(
            "building",
            b.name,
            f"The {b.name} stands on {world.rng.choice(STREETS)} in {b.town}. Its "
            f"walls were restored in {world.year(1950, 2015)} after a winter storm "
            "damaged the roof and the chimneys.",
        )
        world.add_snippet(
            "rooms",
            b.name,
            f"The {b.name} has {facts['rooms']} guest rooms and a public bar known "
            f"for its {world.rng.choice(('cider', 'fish pie', 'folk music'))}. It "
            f"was listed as a protected building in {world.year(1960, 1999)}. "
            "In summer, guests dine in the old stable yard.",
        )


def build_shops(world: World) -> None:
    for s in SHOPS:
        facts = world.entity(s.name, "shop", s.town)
        facts.update(year=world.year(1840, 1990), founder=world.person())
        world.add_image(
            "sign",
            s.name,
            f"Sign of the {s.name}",
            f"The {s.sign} hanging sign of the {s.name} in {s.town}, painted with the word "
            f"{s.word} in {s.ink} letters.",
            functools.partial(paint_sign, sign=s.sign, ink=s.ink, word=s.word),
        )
        world.add_image(
            "awning",
            s.name,
            f"Awning of the {s.name}",
            f"{_cap(_a(s.awning))}-and-white striped awning over the shop window of the "
            f"{s.name} in {s.town}.",
            functools.partial(paint_awning, stripe=s.awning),
        )
        world.add_snippet(
            "founding",
            s.name,
            f"The {s.name} is {_a(s.kind)} on {world.rng.choice(STREETS)} in "
            f"{s.town}, opened in {facts['year']} by {facts['founder']}. "
            "It began as a market stall before moving into its present premises.",
        )
        world.add_snippet(
            "trade",
            s.name,
            f"Known for its {s.product}, the {s.name} has been run by the same "
            f"family for {world.rng.randint(2, 5)} generations and employs "
            f"{world.rng.randint(2, 14)} people. "
            "It also supplies several hotels in the region.",
        )
        world.add_snippet(
            "prize",
            s.name,
            f"In {world.year(1995, 2022)} the {s.name} won the {s.town} Shopfront "
            f"Prize for its restored frontage. The building previously housed "
            f"{_a(world.rng.choice(('saddler', 'bank', 'printer', 'chandlery')))}, "
            "whose iron safe still stands in the back room.",
        )


def build_regions(world: World) -> None:
    for r in REGIONS:
        facts = world.entity(r.name, "region", r.capital)
        facts.update(flag_year=world.year(1820, 1990), population=world.rng.randint(90, 900))
        world.add_image(
            "flag",
            r.name,
            f"Flag of {r.name}",
            f"The flag of {r.name}: {_counted(r.count, r.emblem, r.shape)} on {_a(r.field)} field.",
            functools.partial(
                paint_flag, field_color=r.field, shape=r.shape, emblem=r.emblem, count=r.count
            ),
        )
        world.add_snippet(
            "overview",
            r.name,
            f"{_cap(r.name)} is a province on the far shore of the Sarn Sea. Its "
            f"capital is {r.capital}, and it has about {facts['population']},000 "
            "inhabitants, most of whom live along the coast.",
        )
        world.add_snippet(
            "flag",
            r.name,
            f"The flag of {r.name} was officially adopted in {facts['flag_year']}, "
            "replacing an older banner used by the provincial council. It flies "
            "over every public building in the province.",
            title=f"Flag of {_title(r.name)}",
        )
        world.add_snippet(
            "economy",
            r.name,
            f"The economy of {r.name} is based on {r.economy}. The province is "
            f"governed by a council of {world.rng.randint(20, 60)} elected members "
            f"that meets in {r.capital}.",
        )


def build_towers(world: World) -> None:
    captions = {
        "lighthouse": "The {name} at {town}, a white lighthouse painted with {bands}.",
        "clock tower": "The {body} sandstone {name} in {town}, with a circle-shaped clock face "
        "near the top.",
        "tower": "The {body} stone {name} rising above the rooftops of {town}.",
        "water tower": "The {body} {name} standing on its steel legs above {town}.",
    }
    for t in TOWERS:
        facts = world.entity(t.name, "tower", t.town)
        facts.update(year=world.year(1790, 1960), designer=world.person())
        bands = _counted(t.stripes, t.stripe, "band") if t.stripes else ""
        world.add_image(
            "tower",
            t.name,
            t.name,
            captions[t.kind].format(name=t.name, town=t.town, body=t.body, bands=bands),
            functools.partial(
                paint_tower,
                kind=t.kind,
                height=t.height,
                body=t.body,
                stripe=t.stripe,
                stripes=t.stripes,
            ),
        )
        world.add_snippet(
            "height",
            t.name,
            f"The {t.name} is a {t.height}-metre {t.kind} in {t.town}. It was "
            f"completed in {facts['year']} and is a landmark visible from across "
            "the town.",
        )
        world.add_snippet(
            "design",
            t.name,
            f"The {t.name} was designed by the architect {facts['designer']}, who "
            f"also worked on several public buildings in "
            f"{world.rng.choice([x.name for x in TOWNS if x.name != t.town])}. The "
            "original drawings are kept in the county archive.",
        )
        world.add_snippet(
            "visiting",
            t.name,
            f"Visitors can climb {world.rng.randint(90, 260)} steps to a viewing "
            f"gallery at the top of the {t.name}, which is open from May to "
            "September. A small museum at its base tells the story of its "
            "construction.",
        )


def build_parks(world: World) -> None:
    for p in PARKS:
        facts = world.entity(p.name, "park", p.town)
        facts.update(year=world.year(1840, 1960), designer=world.person())
        world.add_image(
            "pond",
            p.name,
            f"Pond in {p.name}",
            f"{_cap(NUMBER_WORDS[p.ducks])} {_plural('duck', p.ducks)} swimming on the "
            f"{_shaped(p.pond)} pond in {p.name}, {p.town}.",
            functools.partial(paint_pond, shape=p.pond, ducks=p.ducks),
        )
        world.add_image(
            "flower bed",
            p.name,
            f"Flower bed in {p.name}",
            f"{_cap(_a(_shaped(p.bed)))} bed of {p.flowers} flowers in {p.name}, {p.town}.",
            functools.partial(paint_flower_bed, shape=p.bed, flowers=p.flowers),
        )
        world.add_snippet(
            "history",
            p.name,
            f"{p.name} is a public park in {p.town}, laid out in {facts['year']} "
            f"to designs by the landscape gardener {facts['designer']}. The land was "
            "given to the town by a family of local shipowners.",
        )
        world.add_snippet(
            "features",
            p.name,
            f"{p.name} covers {world.rng.randint(2, 40)} hectares and includes a "
            "duck pond, formal flower beds and a bandstand that hosts brass band "
            "concerts on summer Sundays. It is open from dawn until dusk.",
        )


def _display_caption(display: Display, festival: Festival) -> str:
    color, count = display.color, display.count
    words = NUMBER_WORDS[count]
    where = f"the {festival.name} in {festival.town}"
    captions = {
        "balloons": f"{_cap(words)} {color} {_plural('balloon', count)} tied to a stall at "
        f"{where}.",
        "lanterns": f"{_cap(words)} {color} paper {_plural('lantern', count)} hanging over the "
        f"street during {where}.",
        "kites": f"{_cap(words)} {color} diamond-shaped {_plural('kite', count)} flying at "
        f"{where}.",
        "bunting": f"A string of {words} {color} triangular pennants hung for {where}.",
    }
    return captions[display.item]


def build_festivals(world: World) -> None:
    painters = {
        "balloons": paint_balloons,
        "lanterns": paint_lanterns,
        "kites": paint_kites,
        "bunting": paint_bunting,
    }
    for f in FESTIVALS:
        facts = world.entity(f.name, "festival", f.town)
        facts.update(year=world.year(1890, 1995), visitors=world.rng.randint(2, 40) * 1000)
        for display in f.displays:
            world.add_image(
                display.item,
                f.name,
                f"{display.item.capitalize()} at the {f.name}",
                _display_caption(display, f),
                functools.partial(painters[display.item], color=display.color, count=display.count),
            )
        world.add_snippet(
            "history",
            f.name,
            f"The {f.name} is an annual festival held in {f.town} every "
            f"{f.month}. It was first held in {facts['year']} and now attracts "
            f"about {facts['visitors']:,} visitors.",
        )
        world.add_snippet(
            "programme",
            f.name,
            f"Highlights of the {f.name} include {f.highlight}, organised by "
            f"volunteers from the {f.town} Civic Society. "
            "Entry to most events is free, and the local schools close for the day.",
        )


def build_chapels(world: World) -> None:
    for c in CHAPELS:
        facts = world.entity(c.name, "church", c.town)
        facts.update(year=world.year(1100, 1850), glazier=world.person())
        world.add_image(
            "window",
            c.name,
            f"Window of {_the(c.name)}",
            f"The {_shaped(c.window)} stained-glass window above the door of {_the(c.name)} in "
            f"{c.town}, glazed in {c.glass} glass.",
            functools.partial(paint_chapel_window, shape=c.window, glass=c.glass),
        )
        world.add_snippet(
            "history",
            c.name,
            f"{_cap(_the(c.name))} is a stone church in {c.town}, consecrated in "
            f"{facts['year']} and dedicated to {c.saint}. Services are still held "
            "there every Sunday.",
        )
        world.add_snippet(
            "glass",
            c.name,
            f"{_cap(_the(c.name))} is known for its stained-glass window, made by "
            f"the glazier {facts['glazier']} in {world.year(1860, 1930)} "
            "and restored after the great storm of 1953.",
        )


def build_bridges(world: World) -> None:
    for b in BRIDGES:
        facts = world.entity(b.name, "bridge", b.town)
        facts.update(year=world.year(1700, 1900), engineer=world.person())
        world.add_image(
            "bridge",
            b.name,
            b.name,
            f"The {b.name} in {b.town}, a {b.color} bridge with {NUMBER_WORDS[b.arches]} "
            f"{_plural('arch', b.arches)}.",
            functools.partial(paint_bridge, arches=b.arches, color=b.color),
        )
        world.add_snippet(
            "crossing",
            b.name,
            f"The {b.name} is a road bridge that carries the old coach road across "
            f"the {b.river} in {b.town}. It was opened in {facts['year']}.",
        )
        world.add_snippet(
            "engineering",
            b.name,
            f"The {b.name} was built by the engineer {facts['engineer']} and was "
            f"widened in {world.year(1920, 1975)} to carry motor traffic. "
            "Its original parapets survive on the upstream side.",
        )


def build_boats(world: World) -> None:
    for b in BOATS:
        facts = world.entity(b.name, "boat", b.port)
        facts.update(
            year=world.year(1930, 2005),
            builder=world.person(),
            yard=world.rng.choice([t.name for t in TOWNS if t.name != b.port]),
        )
        title = f"Fishing boat {b.name} at {b.port}"
        world.add_image(
            "boat",
            b.name,
            title,
            f"The fishing boat {b.name} moored at {b.port}, with {_a(b.hull)} hull and "
            f"{_a(b.sail)} sail.",
            functools.partial(paint_boat, hull=b.hull, sail=b.sail, name=b.name),
        )
        world.add_snippet(
            "history",
            b.name,
            f"The {b.name} is a wooden fishing boat based at {b.port}. She was "
            f"built at {facts['yard']} in {facts['year']} by the boatbuilder "
            f"{facts['builder']}, and was restored in 2015 with help from a fishing "
            "heritage trust.",
            title=f"{b.name} (boat)",
        )
        world.add_snippet(
            "work",
            b.name,
            f"The {b.name} fishes mainly for {b.catch} and is crewed by "
            f"{world.rng.randint(2, 6)} people. She took part in the "
            f"{world.year(1990, 2023)} Salt Hollow Regatta. "
            "Her catch is landed on the quay early each morning.",
            title=f"{b.name} (boat)",
        )


def build_world(rng: random.Random) -> World:
    world = World(rng)
    for builder in (
        build_towns,
        build_crests,
        build_buildings,
        build_shops,
        build_regions,
        build_towers,
        build_parks,
        build_festivals,
        build_chapels,
        build_bridges,
        build_boats,
    ):
        builder(world)
    return world


# --------------------------------------------------------------------------- questions


@dataclass
class Question:
    qcate: str
    topic: str
    question: str
    answer: str
    keyword: str
    entities: tuple[str, ...]
    images: tuple[str, ...] = ()
    snippets: tuple[str, ...] = ()
    forced_negatives: tuple[str, ...] = ()
    avoid: tuple[str, ...] = ()  # sources that would answer the question: never negatives
    img_negatives: list[ImageFact] = field(default_factory=list)
    txt_negatives: list[TextFact] = field(default_factory=list)


NamedT = TypeVar("NamedT", Building, Shop, Region, Tower, Park, Festival, Chapel, Bridge, Boat)


def _by_name(items: Iterable[NamedT]) -> dict[str, NamedT]:
    """Questions look entities up by name, so answers always follow the tables above."""
    return {item.name: item for item in items}


B, S, R, T = _by_name(BUILDINGS), _by_name(SHOPS), _by_name(REGIONS), _by_name(TOWERS)
P, F, C = _by_name(PARKS), _by_name(FESTIVALS), _by_name(CHAPELS)
BR, BO = _by_name(BRIDGES), _by_name(BOATS)
# The one truncated JPEG: a door like the Harbor Inn's, so it is a natural distractor there.
TRUNCATED_KEY = "door:Harbor View Hotel"


def color_questions() -> list[Question]:
    lantern = F["Greywick Lantern Night"].displays[0]
    return [
        Question(
            "color",
            "inns",
            "What color is the door of the Harbor Inn?",
            f"The door of the Harbor Inn is painted {B['Harbor Inn'].door}.",
            B["Harbor Inn"].door,
            ("Harbor Inn",),
            images=("door:Harbor Inn",),
            forced_negatives=(TRUNCATED_KEY,),
        ),
        Question(
            "color",
            "shops",
            "What color is the sign of the Quill Bookshop?",
            f"The sign of the Quill Bookshop is {S['Quill Bookshop'].sign}.",
            S["Quill Bookshop"].sign,
            ("Quill Bookshop",),
            images=("sign:Quill Bookshop",),
        ),
        Question(
            "color",
            "flags",
            "What color is the heart on the flag of the Calder Isles?",
            f"The heart on the flag of the Calder Isles is {R['the Calder Isles'].emblem}.",
            R["the Calder Isles"].emblem,
            ("the Calder Isles",),
            images=("flag:the Calder Isles",),
        ),
        Question(
            "color",
            "parks",
            "What color are the flowers in the flower bed of Willow Gardens?",
            f"The flowers in the flower bed of Willow Gardens are {P['Willow Gardens'].flowers}.",
            P["Willow Gardens"].flowers,
            ("Willow Gardens",),
            images=("flower bed:Willow Gardens",),
        ),
        Question(
            "color",
            "festivals",
            "What color are the balloons at the Alder Vale Spring Fair?",
            f"The balloons at the Alder Vale Spring Fair are "
            f"{F['Alder Vale Spring Fair'].displays[0].color}.",
            F["Alder Vale Spring Fair"].displays[0].color,
            ("Alder Vale Spring Fair",),
            images=("balloons:Alder Vale Spring Fair",),
        ),
        Question(
            "color",
            "boats",
            "What color is the hull of the fishing boat Sea Lark?",
            f"The fishing boat Sea Lark has a {BO['Sea Lark'].hull} hull.",
            BO["Sea Lark"].hull,
            ("Sea Lark",),
            images=("boat:Sea Lark",),
        ),
        Question(
            "color",
            "churches",
            "What color is the glass in the window of the Chapel of St. Aidan?",
            f"The window of the Chapel of St. Aidan is glazed in "
            f"{C['Chapel of St. Aidan'].glass} glass.",
            C["Chapel of St. Aidan"].glass,
            ("Chapel of St. Aidan",),
            images=("window:Chapel of St. Aidan",),
        ),
        Question(
            "color",
            "lighthouses",
            "What color are the stripes on the Marrow Point Lighthouse?",
            f"The stripes on the Marrow Point Lighthouse are "
            f"{T['Marrow Point Lighthouse'].stripe}.",
            T["Marrow Point Lighthouse"].stripe,
            ("Marrow Point Lighthouse",),
            images=("tower:Marrow Point Lighthouse",),
        ),
        Question(
            "color",
            "festivals",
            "What color are the lanterns at the Greywick Lantern Night?",
            f"The lanterns at the Greywick Lantern Night are {lantern.color}.",
            lantern.color,
            ("Greywick Lantern Night",),
            images=("lanterns:Greywick Lantern Night",),
        ),
        Question(
            "color",
            "shops",
            "What color are the stripes on the awning of the Saltwind Fishmonger?",
            f"The awning of the Saltwind Fishmonger has "
            f"{S['Saltwind Fishmonger'].awning} and white stripes.",
            S["Saltwind Fishmonger"].awning,
            ("Saltwind Fishmonger",),
            images=("awning:Saltwind Fishmonger",),
        ),
    ]


def shape_questions() -> list[Question]:
    brigid, greywick = C["St. Brigid's Church"], next(c for c in CRESTS if c.town == "Greywick")
    kites = F["Kestrel Bay Kite Festival"].displays[0]
    assert kites.item == "kites"  # kites are always drawn as diamonds
    return [
        Question(
            "shape",
            "flags",
            "What shape is on the flag of Sarnia?",
            f"The flag of Sarnia shows a {R['Sarnia'].shape}.",
            R["Sarnia"].shape,
            ("Sarnia",),
            images=("flag:Sarnia",),
        ),
        Question(
            "shape",
            "flags",
            "What shape are the emblems on the flag of Ostmark?",
            f"The emblems on the flag of Ostmark are {R['Ostmark'].shape}s.",
            R["Ostmark"].shape,
            ("Ostmark",),
            images=("flag:Ostmark",),
        ),
        Question(
            "shape",
            "parks",
            "What shape is the pond in Kell Park?",
            f"The pond in Kell Park is shaped like a {P['Kell Park'].pond}.",
            P["Kell Park"].pond,
            ("Kell Park",),
            images=("pond:Kell Park",),
        ),
        Question(
            "shape",
            "parks",
            "What shape is the flower bed in Queen Maud Gardens?",
            f"The flower bed in Queen Maud Gardens is shaped like a {P['Queen Maud Gardens'].bed}.",
            P["Queen Maud Gardens"].bed,
            ("Queen Maud Gardens",),
            images=("flower bed:Queen Maud Gardens",),
        ),
        Question(
            "shape",
            "parks",
            "What shape is the pond in Heron Common?",
            f"The pond in Heron Common is a {P['Heron Common'].pond}.",
            P["Heron Common"].pond,
            ("Heron Common",),
            images=("pond:Heron Common",),
        ),
        Question(
            "shape",
            "churches",
            "What shape is the window of St. Brigid's Church?",
            f"The stained-glass window of St. Brigid's Church is a {brigid.window}.",
            brigid.window,
            (brigid.name,),
            images=(f"window:{brigid.name}",),
        ),
        Question(
            "shape",
            "heraldry",
            "What shape is on the coat of arms of Greywick?",
            f"The coat of arms of Greywick shows a {greywick.shape}.",
            greywick.shape,
            ("Coat of arms of Greywick",),
            images=("crest:Coat of arms of Greywick",),
        ),
        Question(
            "shape",
            "festivals",
            "What shape are the kites at the Kestrel Bay Kite Festival?",
            "The kites at the Kestrel Bay Kite Festival are diamond shaped.",
            "diamond",
            ("Kestrel Bay Kite Festival",),
            images=("kites:Kestrel Bay Kite Festival",),
        ),
    ]


def number_questions() -> list[Question]:
    anchor, willow = B["Anchor Hotel"], P["Willow Gardens"]
    kestrel, alder = T["Kestrel Point Lighthouse"], BR["Alder Bridge"]
    balloons = F["Dunmore Harbor Festival"].displays[0]
    lanterns = F["Greywick Lantern Night"].displays[0]
    return [
        Question(
            "number",
            "inns",
            "How many windows are on the upper floor of the Anchor Hotel?",
            f"The upper floor of the Anchor Hotel has {anchor.windows} windows.",
            str(anchor.windows),
            (anchor.name,),
            images=("upper floor:Anchor Hotel",),
        ),
        Question(
            "number",
            "flags",
            "How many stars are on the flag of Tollund?",
            f"There are {R['Tollund'].count} stars on the flag of Tollund.",
            str(R["Tollund"].count),
            ("Tollund",),
            images=("flag:Tollund",),
        ),
        Question(
            "number",
            "flags",
            "How many squares are on the flag of Brevanne?",
            f"The flag of Brevanne has {R['Brevanne'].count} squares.",
            str(R["Brevanne"].count),
            ("Brevanne",),
            images=("flag:Brevanne",),
        ),
        Question(
            "number",
            "parks",
            "How many ducks are swimming on the pond in Willow Gardens?",
            f"{willow.ducks} ducks are swimming on the pond in Willow Gardens.",
            str(willow.ducks),
            (willow.name,),
            images=("pond:Willow Gardens",),
        ),
        Question(
            "number",
            "lighthouses",
            "How many red stripes does the Kestrel Point Lighthouse have?",
            f"The Kestrel Point Lighthouse has {kestrel.stripes} red stripes.",
            str(kestrel.stripes),
            (kestrel.name,),
            images=("tower:Kestrel Point Lighthouse",),
        ),
        Question(
            "number",
            "bridges",
            "How many arches does the Alder Bridge have?",
            f"The Alder Bridge has {alder.arches} arches.",
            str(alder.arches),
            (alder.name,),
            images=("bridge:Alder Bridge",),
        ),
        Question(
            "number",
            "festivals",
            "How many balloons are tied to the stall at the Dunmore Harbor Festival?",
            f"There are {balloons.count} balloons tied to the "
            "stall at the Dunmore Harbor Festival.",
            str(balloons.count),
            ("Dunmore Harbor Festival",),
            images=("balloons:Dunmore Harbor Festival",),
        ),
        Question(
            "number",
            "festivals",
            "How many lanterns hang over the street at the Greywick Lantern Night?",
            f"{lanterns.count} lanterns hang over the street at the Greywick Lantern Night.",
            str(lanterns.count),
            ("Greywick Lantern Night",),
            images=("lanterns:Greywick Lantern Night",),
        ),
    ]


def _yes_no(
    topic: str, question: str, claim: bool, yes: str, no: str, entity: str, image: str
) -> Question:
    """A YesNo question whose answer follows from the world's data, not from a literal."""
    answer, keyword = (f"Yes, {yes}", "yes") if claim else (f"No, {no}", "no")
    return Question("YesNo", topic, question, answer, keyword, (entity,), images=(image,))


def yes_no_questions() -> list[Question]:
    gull, veloria, millbrook = B["Gull Tavern"], R["Veloria"], P["Millbrook Green"]
    moon, tollgate, gannet = S["Moonlight Cafe"], BR["Tollgate Bridge"], BO["Gannet"]
    abbey, salt = C["Greywick Abbey"], T["Salt Hollow Lighthouse"]
    return [
        _yes_no(
            "inns",
            "Is the door of the Gull Tavern green?",
            gull.door == "green",
            "the door of the Gull Tavern is green.",
            f"the door of the Gull Tavern is {gull.door}.",
            gull.name,
            "door:Gull Tavern",
        ),
        _yes_no(
            "flags",
            "Is there a circle on the flag of Veloria?",
            veloria.shape == "circle",
            "the flag of Veloria has a circle on it.",
            f"the flag of Veloria has {veloria.shape}s on it, not a circle.",
            "Veloria",
            "flag:Veloria",
        ),
        _yes_no(
            "parks",
            "Are there more than three ducks on the pond in Millbrook Green?",
            millbrook.ducks > 3,
            f"there are {millbrook.ducks} ducks on the pond in Millbrook Green.",
            f"there are only {millbrook.ducks} ducks on the pond in Millbrook Green.",
            millbrook.name,
            "pond:Millbrook Green",
        ),
        _yes_no(
            "shops",
            "Is the sign of the Moonlight Cafe yellow?",
            moon.sign == "yellow",
            "the sign of the Moonlight Cafe is yellow.",
            f"the sign of the Moonlight Cafe is {moon.sign}, not yellow.",
            moon.name,
            "sign:Moonlight Cafe",
        ),
        _yes_no(
            "bridges",
            "Does the Tollgate Bridge have two arches?",
            tollgate.arches == 2,
            "the Tollgate Bridge has two arches.",
            f"the Tollgate Bridge has {tollgate.arches} arches.",
            tollgate.name,
            "bridge:Tollgate Bridge",
        ),
        _yes_no(
            "boats",
            "Is the hull of the fishing boat Gannet white?",
            gannet.hull == "white",
            "the Gannet has a white hull.",
            f"the hull of the Gannet is {gannet.hull}, not white.",
            gannet.name,
            "boat:Gannet",
        ),
        _yes_no(
            "churches",
            "Is the window of Greywick Abbey square?",
            abbey.window == "square",
            "the window of Greywick Abbey is square.",
            f"the window of Greywick Abbey is a {abbey.window}.",
            abbey.name,
            "window:Greywick Abbey",
        ),
        _yes_no(
            "lighthouses",
            "Does the Salt Hollow Lighthouse have red stripes?",
            salt.stripe == "red",
            "the Salt Hollow Lighthouse has red stripes.",
            f"the stripes on the Salt Hollow Lighthouse are {salt.stripe}, not red.",
            salt.name,
            "tower:Salt Hollow Lighthouse",
        ),
    ]


def _choose(
    topic: str,
    question: str,
    options: tuple[str, str],
    winner: int,
    answer: str,
    entities: tuple[str, str],
    images: tuple[str, str],
    avoid: tuple[str, ...] = (),
) -> Question:
    """A two-option question; both options' images are gold, as in WebQA's 'choose'."""
    return Question(
        "choose", topic, question, answer, options[winner], entities, images=images, avoid=avoid
    )


def choose_questions() -> list[Question]:
    aldric, brennan = T["Aldric Tower"], T["Brennan Tower"]
    salt, marrow = T["Salt Hollow Lighthouse"], T["Marrow Point Lighthouse"]
    anchor, kingfisher = B["Anchor Hotel"], B["Kingfisher Hotel"]
    kell, mill = BR["Kell Bridge"], BR["Mill Bridge"]
    kell_park, willow = P["Kell Park"], P["Willow Gardens"]
    lark, osprey = BO["Sea Lark"], BO["Osprey"]
    ostmark, sarnia = R["Ostmark"], R["Sarnia"]
    assert aldric.height > brennan.height and marrow.height > salt.height
    assert (anchor.door, kingfisher.door) == ("red", "blue") and mill.arches > kell.arches
    assert kell_park.pond == "heart" != willow.pond and lark.sail == "yellow" != osprey.sail
    assert ostmark.shape == "triangle" != sarnia.shape
    return [
        _choose(
            "towers",
            "Which is taller, the Aldric Tower or the Brennan Tower?",
            ("Aldric Tower", "Brennan Tower"),
            0,
            "The Aldric Tower is taller than the Brennan Tower.",
            (aldric.name, brennan.name),
            ("tower:Aldric Tower", "tower:Brennan Tower"),
            avoid=("height:Aldric Tower", "height:Brennan Tower"),
        ),
        _choose(
            "flags",
            "Which flag has triangles on it, the flag of Sarnia or the flag of Ostmark?",
            ("Sarnia", "Ostmark"),
            1,
            "The flag of Ostmark has triangles on it; the flag of Sarnia has a circle.",
            ("Sarnia", "Ostmark"),
            ("flag:Sarnia", "flag:Ostmark"),
        ),
        _choose(
            "inns",
            "Which has a red door, the Anchor Hotel or the Kingfisher Hotel?",
            ("Anchor Hotel", "Kingfisher Hotel"),
            0,
            "The Anchor Hotel has a red door, while the Kingfisher Hotel's door is blue.",
            (anchor.name, kingfisher.name),
            ("door:Anchor Hotel", "door:Kingfisher Hotel"),
        ),
        _choose(
            "bridges",
            "Which has more arches, the Kell Bridge or the Mill Bridge?",
            ("Kell Bridge", "Mill Bridge"),
            1,
            f"The Mill Bridge has more arches ({mill.arches}) than the Kell Bridge "
            f"({kell.arches}).",
            (kell.name, mill.name),
            ("bridge:Kell Bridge", "bridge:Mill Bridge"),
        ),
        _choose(
            "parks",
            "Which has a heart-shaped pond, Willow Gardens or Kell Park?",
            ("Willow Gardens", "Kell Park"),
            1,
            "Kell Park has a heart-shaped pond; the pond in Willow Gardens is a circle.",
            (willow.name, kell_park.name),
            ("pond:Willow Gardens", "pond:Kell Park"),
        ),
        _choose(
            "lighthouses",
            "Which is taller, the Salt Hollow Lighthouse or the Marrow Point Lighthouse?",
            ("Salt Hollow Lighthouse", "Marrow Point Lighthouse"),
            1,
            "The Marrow Point Lighthouse is taller than the Salt Hollow Lighthouse.",
            (salt.name, marrow.name),
            ("tower:Salt Hollow Lighthouse", "tower:Marrow Point Lighthouse"),
            avoid=("height:Salt Hollow Lighthouse", "height:Marrow Point Lighthouse"),
        ),
        _choose(
            "boats",
            "Which fishing boat has a yellow sail, the Sea Lark or the Osprey?",
            ("Sea Lark", "Osprey"),
            0,
            "The Sea Lark has a yellow sail; the Osprey's sail is white.",
            (lark.name, osprey.name),
            ("boat:Sea Lark", "boat:Osprey"),
        ),
    ]


def other_questions() -> list[Question]:
    lantern, anvil, pepper = S["Lantern Bakery"], S["Iron Anvil Forge"], S["Pepper Mill Grocer"]
    harbor, crown, osprey = B["Harbor Inn"], B["Crown Inn"], BO["Osprey"]
    assert [b.name for b in BOATS if b.port == osprey.port and b.hull == osprey.hull] == [
        osprey.name
    ]
    return [
        Question(
            "Others",
            "shops",
            "What word is painted on the sign of the Lantern Bakery?",
            f"The sign of the Lantern Bakery reads {lantern.word}.",
            lantern.word,
            (lantern.name,),
            images=("sign:Lantern Bakery",),
        ),
        Question(
            "Others",
            "inns",
            "What house number is above the door of the Harbor Inn?",
            f"The number above the door of the Harbor Inn is {harbor.number}.",
            str(harbor.number),
            (harbor.name,),
            images=("door:Harbor Inn",),
        ),
        Question(
            "Others",
            "boats",
            "What is the name of the fishing boat with a green hull at Salt Hollow?",
            f"The fishing boat with a green hull at Salt Hollow is the {osprey.name}.",
            osprey.name,
            (osprey.name,),
            images=("boat:Osprey",),
        ),
        Question(
            "Others",
            "shops",
            "What is written on the sign of the Iron Anvil Forge?",
            f"The sign of the Iron Anvil Forge says {anvil.word}.",
            anvil.word,
            (anvil.name,),
            images=("sign:Iron Anvil Forge",),
        ),
        Question(
            "Others",
            "shops",
            "Which word is painted on the sign of the Pepper Mill Grocer?",
            f"The word {pepper.word} is painted on the sign of the Pepper Mill Grocer.",
            pepper.word,
            (pepper.name,),
            images=("sign:Pepper Mill Grocer",),
        ),
        Question(
            "Others",
            "inns",
            "What is the house number on the door of the Crown Inn?",
            f"The house number of the Crown Inn is {crown.number}.",
            str(crown.number),
            (crown.name,),
            images=("door:Crown Inn",),
        ),
        Question(
            "Others",
            "parks",
            "What kind of bird swims on the pond in Lark Meadow Park?",
            "Ducks swim on the pond in Lark Meadow Park.",
            "ducks",
            ("Lark Meadow Park",),
            images=("pond:Lark Meadow Park",),
        ),
    ]


def _text_question(
    topic: str, question: str, answer: str, keyword: str, snippets: tuple[str, ...]
) -> Question:
    entities = tuple(dict.fromkeys(key.split(":", 1)[1] for key in snippets))
    return Question("text", topic, question, answer, keyword, entities, snippets=snippets)


def _earlier(world: World, first: str, second: str) -> tuple[str, int, int]:
    """The entity whose 'year' fact is earlier, with both years (the RNG must not tie them)."""
    year_first, year_second = world.facts[first]["year"], world.facts[second]["year"]
    assert isinstance(year_first, int) and isinstance(year_second, int)
    assert year_first != year_second, (first, second)
    return (first if year_first < year_second else second), year_first, year_second


def text_questions(world: World) -> list[Question]:
    f = world.facts
    older, harbor_year, gull_year = _earlier(world, "Harbor Inn", "Gull Tavern")
    first, quill_year, lantern_year = _earlier(world, "Quill Bookshop", "Lantern Bakery")
    aldric, population = T["Aldric Tower"], f["Dunmore"]["population"]
    return [
        _text_question(
            "inns",
            "In what year was the Harbor Inn built?",
            f"The Harbor Inn was built in {harbor_year}.",
            str(harbor_year),
            ("history:Harbor Inn",),
        ),
        _text_question(
            "shops",
            "Who founded the Lantern Bakery?",
            f"The Lantern Bakery was opened by {f['Lantern Bakery']['founder']}.",
            str(f["Lantern Bakery"]["founder"]),
            ("founding:Lantern Bakery",),
        ),
        _text_question(
            "provinces",
            "What is the capital of Veloria?",
            f"The capital of Veloria is {R['Veloria'].capital}.",
            R["Veloria"].capital,
            ("overview:Veloria",),
        ),
        _text_question(
            "towers",
            "How tall is the Aldric Tower?",
            f"The Aldric Tower is {aldric.height} metres tall.",
            f"{aldric.height} metres",
            ("height:Aldric Tower",),
        ),
        _text_question(
            "flags",
            "In what year was the flag of Sarnia adopted?",
            f"The flag of Sarnia was adopted in {f['Sarnia']['flag_year']}.",
            str(f["Sarnia"]["flag_year"]),
            ("flag:Sarnia",),
        ),
        _text_question(
            "parks",
            "Who designed Kell Park?",
            f"Kell Park was laid out to designs by the landscape gardener "
            f"{f['Kell Park']['designer']}.",
            str(f["Kell Park"]["designer"]),
            ("history:Kell Park",),
        ),
        _text_question(
            "bridges",
            "Which river does the Kell Bridge cross?",
            f"The Kell Bridge crosses the {BR['Kell Bridge'].river}.",
            BR["Kell Bridge"].river,
            ("crossing:Kell Bridge",),
        ),
        _text_question(
            "festivals",
            "When was the Greywick Lantern Night first held?",
            f"The Greywick Lantern Night was first held in {f['Greywick Lantern Night']['year']}.",
            str(f["Greywick Lantern Night"]["year"]),
            ("history:Greywick Lantern Night",),
        ),
        _text_question(
            "inns",
            "How many guest rooms does the Anchor Hotel have?",
            f"The Anchor Hotel has {f['Anchor Hotel']['rooms']} guest rooms.",
            str(f["Anchor Hotel"]["rooms"]),
            ("rooms:Anchor Hotel",),
        ),
        _text_question(
            "boats",
            "In which town was the fishing boat Maribel built?",
            f"The Maribel was built at {f['Maribel']['yard']}.",
            str(f["Maribel"]["yard"]),
            ("history:Maribel",),
        ),
        _text_question(
            "lighthouses",
            "Who designed the Kestrel Point Lighthouse?",
            f"The Kestrel Point Lighthouse was designed by the architect "
            f"{f['Kestrel Point Lighthouse']['designer']}.",
            str(f["Kestrel Point Lighthouse"]["designer"]),
            ("design:Kestrel Point Lighthouse",),
        ),
        _text_question(
            "towns",
            "What is the population of Dunmore?",
            f"Dunmore has a population of {population:,}.",
            f"{population:,}",
            ("overview:Dunmore",),
        ),
        _text_question(
            "inns",
            "Which is older, the Harbor Inn or the Gull Tavern?",
            f"The {older} is older: the Harbor Inn was built in {harbor_year} and "
            f"the Gull Tavern in {gull_year}.",
            older,
            ("history:Harbor Inn", "history:Gull Tavern"),
        ),
        _text_question(
            "shops",
            "Which opened first, the Quill Bookshop or the Lantern Bakery?",
            f"The {first} opened first: the Quill Bookshop opened in {quill_year} and "
            f"the Lantern Bakery in {lantern_year}.",
            first,
            ("founding:Quill Bookshop", "founding:Lantern Bakery"),
        ),
    ]


def all_questions(world: World) -> list[Question]:
    return [
        *text_questions(world),
        *yes_no_questions(),
        *other_questions(),
        *choose_questions(),
        *number_questions(),
        *color_questions(),
        *shape_questions(),
    ]


# --------------------------------------------------------------------------- distractors


FactT = TypeVar("FactT", ImageFact, TextFact)


def _sample(rng: random.Random, pool: Iterable[FactT], taken: set[str], count: int) -> list[FactT]:
    """Draw up to `count` facts not yet taken, marking them taken."""
    candidates = [fact for fact in pool if fact.key not in taken]
    picked = rng.sample(candidates, min(max(count, 0), len(candidates)))
    taken.update(fact.key for fact in picked)
    return picked


def image_negatives(
    world: World, rng: random.Random, question: Question, used: set[str]
) -> list[ImageFact]:
    """Hard negatives first (same entity, same kind of object, same town), as in WebQA where
    distractors were mined to look relevant; then sources no question references yet."""
    pool = list(world.images.values())
    entities = set(question.entities)
    towns = {world.town[entity] for entity in entities}
    categories = {world.images[key].category for key in question.images}
    categories = categories or {image.category for image in pool if image.entity in entities}
    taken = {*question.images, *question.forced_negatives, *question.avoid}
    total = rng.randint(MIN_NEGATIVES, MAX_NEGATIVES)
    chosen = [world.images[key] for key in question.forced_negatives]
    chosen += _sample(rng, (i for i in pool if i.entity in entities), taken, 2)
    chosen += _sample(rng, (i for i in pool if i.category in categories), taken, rng.randint(2, 5))
    chosen += _sample(rng, (i for i in pool if i.town in towns), taken, 2)
    chosen += _sample(rng, (i for i in pool if i.key not in used), taken, total - len(chosen))
    chosen += _sample(rng, pool, taken, total - len(chosen))
    rng.shuffle(chosen)
    return chosen


def text_negatives(
    world: World, rng: random.Random, question: Question, used: set[str]
) -> list[TextFact]:
    """Same policy as for images: the entity's other facts and the same fact about its peers
    (another inn's founding year) make the hardest distractors."""
    pool = list(world.snippets.values())
    entities = set(question.entities)
    groups = {world.group[entity] for entity in entities}
    towns = {world.town[entity] for entity in entities}
    aspects = {world.snippets[key].aspect for key in question.snippets}
    taken = {*question.snippets, *question.avoid}
    total = rng.randint(MIN_NEGATIVES, MAX_NEGATIVES)
    chosen = _sample(rng, (s for s in pool if s.entity in entities), taken, 3)
    chosen += _sample(
        rng,
        (s for s in pool if s.group in groups and s.aspect in aspects),
        taken,
        rng.randint(2, 4),
    )
    chosen += _sample(rng, (s for s in pool if s.group in groups), taken, 2)
    chosen += _sample(rng, (s for s in pool if s.town in towns), taken, 1)
    chosen += _sample(rng, (s for s in pool if s.key not in used), taken, total - len(chosen))
    chosen += _sample(rng, pool, taken, total - len(chosen))
    rng.shuffle(chosen)
    return chosen


def _attach(
    world: World,
    questions: Sequence[Question],
    fact: ImageFact | TextFact,
    negatives: Callable[[Question], list],
) -> None:
    """Add one more negative to the least-loaded open question, preferring the fact's town."""
    open_questions = [
        q for q in questions if len(negatives(q)) < MAX_NEGATIVES and fact.key not in q.avoid
    ]
    if not open_questions:
        raise RuntimeError(f"no question has room left for the distractor {fact.key!r}")
    local = [q for q in open_questions if any(world.town[e] == fact.town for e in q.entities)]
    target = min(local or open_questions, key=lambda q: len(negatives(q)))
    negatives(target).append(fact)


def cover_unused(world: World, questions: Sequence[Question]) -> None:
    """Reference every source somewhere: readers build the corpus from the JSON alone."""
    used_images = {i.key for q in questions for i in q.img_negatives} | {
        key for q in questions for key in q.images
    }
    used_snippets = {s.key for q in questions for s in q.txt_negatives} | {
        key for q in questions for key in q.snippets
    }
    for image in world.images.values():
        if image.key not in used_images:
            _attach(world, questions, image, lambda q: q.img_negatives)
    for snippet in world.snippets.values():
        if snippet.key not in used_snippets:
            _attach(world, questions, snippet, lambda q: q.txt_negatives)


# --------------------------------------------------------------------------- scene text
#
# Street signs and shop fronts whose captions do not spell the words painted on them: only the
# text read in the pixels (`mmrag index build --ocr`) finds them or answers about them. They
# come last and draw from their own RNG, so everything above stays byte-identical.

SCENE_SEED = SEED + 12
SCENE_TRAIN_EVERY = 3  # the OCR lists need a few train questions to be calibrated on
SCENE_WORD_GAP = 16  # PP-OCR glues words set closer, as it does on many real signs


class Placard(NamedTuple):
    name: str
    town: str
    lines: tuple[str, ...]
    board: Color
    ink: Color
    wall: str
    title: str
    caption: str


PLACARDS = (
    # Look-alike photos (three lamp-post signs, two pier boards, two shop fronts) whose
    # captions differ only in the place: the painted words tell them apart.
    Placard(
        "Mill Lane sign", "Alder Vale", ("DOUBLE PARKING", "PROHIBITED"), COLORS["white"],
        COLORS["black"], "brick", "Sign on a lamp post",
        "A small sign fixed to a lamp post in Mill Lane, Alder Vale.",
    ),
    Placard(
        "Quay Street sign", "Dunmore", ("NO ENTRY", "EXCEPT BUSES"), COLORS["white"],
        COLORS["red"], "stone", "Sign on a lamp post",
        "A small sign fixed to a lamp post in Quay Street, Dunmore.",
    ),
    Placard(
        "Church Road sign", "Greywick", ("RESIDENTS", "ONLY"), COLORS["blue"],
        COLORS["white"], "brick", "Sign on a lamp post",
        "A small sign fixed to a lamp post in Church Road, Greywick.",
    ),
    Placard(
        "harbour office", "Kestrel Bay", ("HARBOUR MASTER", "KNOCK TWICE"), COLORS["blue"],
        COLORS["white"], "stone", "Office door on the quay",
        "The door of a grey office on the quay at Kestrel Bay.",
    ),
    Placard(
        "market bus stop", "Dunmore", ("ROUTE 12", "TO GREYWICK"), COLORS["yellow"],
        COLORS["black"], "stone", "Bus stop by the market",
        "A bus stop shelter beside the market square of Dunmore.",
    ),
    Placard(
        "Bridge Street shop", "Salt Hollow", ("MARLOW AND SONS", "EST 1887"), COLORS["green"],
        COLORS["white"], "cream", "Shop front",
        "A shop front painted green on Bridge Street, Salt Hollow.",
    ),
    Placard(
        "Harbour Row shop", "Dunmore", ("HALE AND DAUGHTERS", "EST 1902"), COLORS["blue"],
        COLORS["white"], "cream", "Shop front",
        "A shop front painted blue on Harbour Row, Dunmore.",
    ),
    Placard(
        "Marrow Point station", "Marrow Point", ("PLATFORM 3",), COLORS["blue"],
        COLORS["white"], "white", "Station stairs",
        "A sign above the stairs of the railway station in Marrow Point.",
    ),
    Placard(
        "Greywick pub board", "Greywick", ("QUIZ NIGHT", "THURSDAY"), COLORS["black"],
        COLORS["white"], "brick", "Board outside a pub",
        "A board on the pavement outside a pub in Greywick.",
    ),
    Placard(
        "Salt Hollow pier", "Salt Hollow", ("DANGER", "DEEP WATER"), COLORS["red"],
        COLORS["white"], "stone", "Board on a pier",
        "A board at the end of the pier in Salt Hollow.",
    ),
    Placard(
        "Kestrel Bay pier", "Kestrel Bay", ("NO FISHING", "FROM THE PIER"), COLORS["yellow"],
        COLORS["black"], "stone", "Board on a pier",
        "A board at the end of the pier in Kestrel Bay.",
    ),
    Placard(
        "Kestrel Bay town hall", "Kestrel Bay", ("SUMMER EXHIBITION", "FREE ENTRY"),
        COLORS["white"], COLORS["purple"], "cream", "Banner on the town hall",
        "A banner on the front of the town hall in Kestrel Bay.",
    ),
)  # fmt: skip


def paint_placard(draw: ImageDraw.ImageDraw, placard: Placard) -> None:
    """The board's lines centred, words well apart, shrunk to fit its width."""
    _background(draw, WALLS[placard.wall])
    draw.rectangle((10, 18, 182, 126), fill=placard.board, outline=OUTLINE, width=3)
    for number, line in enumerate(placard.lines):
        words = line.split()
        size = 18
        while True:
            font = _font(size)
            width = sum(draw.textlength(word, font=font) for word in words)
            width += SCENE_WORD_GAP * (len(words) - 1)
            if width <= 160 or size <= 8:
                break
            size -= 1
        x = 96 - width / 2
        y = 72 + (number - (len(placard.lines) - 1) / 2) * 30
        for word in words:
            draw.text((x, y), word, fill=placard.ink, font=font, anchor="lm")
            x += draw.textlength(word, font=font) + SCENE_WORD_GAP


def build_placards(world: World) -> None:
    for placard in PLACARDS:
        world.entity(placard.name, "placards", placard.town)
        world.add_image(
            "placard",
            placard.name,
            placard.title,
            placard.caption,
            functools.partial(paint_placard, placard=placard),
        )


def _placard_question(
    qcate: str, question: str, answer: str, keyword: str, name: str
) -> Question:
    return Question(qcate, "street signs", question, answer, keyword, (name,), (f"placard:{name}",))


def scene_text_questions() -> list[Question]:
    """Some are found only through a sign's text (which of the look-alikes?), the others are
    answered only by it; the train ones (every third) are of the first kind, so calibration
    sees the OCR lists find gold."""
    q = _placard_question
    return [
        q("Others", "On which street is the sign saying double parking is prohibited?",
          "The sign saying double parking is prohibited is in Mill Lane.", "Mill Lane",
          "Mill Lane sign"),
        q("Others", "What does the sign on the door of the harbour office in Kestrel Bay ask "
          "visitors to do?", "The sign asks visitors to knock twice.", "knock twice",
          "harbour office"),
        q("Others", "Where does the route 12 bus to Greywick stop?",
          "The route 12 bus to Greywick stops beside the market square of Dunmore.",
          "market square", "market bus stop"),
        q("Others", "What is the name of the shop painted green on Bridge Street in Salt Hollow?",
          "The shop painted green on Bridge Street is Marlow and Sons.", "Marlow and Sons",
          "Bridge Street shop"),
        q("number", "In what year was the shop painted green on Bridge Street in Salt Hollow "
          "established?", "The shop on Bridge Street was established in 1887.", "1887",
          "Bridge Street shop"),
        q("Others", "Which town has a board warning of deep water at the end of its pier?",
          "The board warning of deep water is at the end of the pier in Salt Hollow.",
          "Salt Hollow", "Salt Hollow pier"),
        q("number", "Which platform is signposted above the stairs of the railway station in "
          "Marrow Point?", "The sign above the stairs points to platform 3.", "3",
          "Marrow Point station"),
        q("Others", "On which day is the quiz night at the pub in Greywick?",
          "The quiz night at the pub in Greywick is on Thursday.", "Thursday",
          "Greywick pub board"),
        q("Others", "Which building in Kestrel Bay announces a summer exhibition with free entry?",
          "The town hall of Kestrel Bay announces a summer exhibition with free entry.",
          "town hall", "Kestrel Bay town hall"),
        q("Others", "On which street does a sign let no one enter except buses?",
          "The sign letting only buses enter is in Quay Street.", "Quay Street",
          "Quay Street sign"),
        q("number", "In what year was the shop painted blue on Harbour Row in Dunmore "
          "established?", "The shop on Harbour Row was established in 1902.", "1902",
          "Harbour Row shop"),
    ]  # fmt: skip


def scene_text_records(world: World, rng: random.Random) -> dict[str, Record]:
    """The placards' questions with distractors, drawn from `rng` alone."""
    questions = scene_text_questions()
    used_images = set(world.images)
    used_snippets = set(world.snippets)
    records: dict[str, Record] = {}
    for index, question in enumerate(questions):
        question.img_negatives = image_negatives(world, rng, question, used_images)
        question.txt_negatives = text_negatives(world, rng, question, used_snippets)
        guid = f"{rng.getrandbits(128):032x}"
        split = "train" if index % SCENE_TRAIN_EVERY == SCENE_TRAIN_EVERY - 1 else "val"
        records[guid] = question_record(world, question, guid, split, rng)
    return records


# --------------------------------------------------------------------------- records and files


def _maybe_quote(text: str, rng: random.Random, rate: float) -> str:
    """The release wraps most Q and A strings in literal double quotes; mimic that, not always."""
    return f'"{text}"' if rng.random() < rate else text


def question_record(
    world: World, question: Question, guid: str, split: str, rng: random.Random
) -> Record:
    return {
        "Guid": guid,
        "Q": _maybe_quote(question.question, rng, QUOTE_Q_RATE),
        "A": [_maybe_quote(question.answer, rng, QUOTE_A_RATE)],
        "Keywords_A": question.keyword,
        "Qcate": question.qcate,
        "split": split,
        "topic": question.topic,
        "img_posFacts": [world.images[key].record() for key in question.images],
        "img_negFacts": [image.record() for image in question.img_negatives],
        "txt_posFacts": [world.snippets[key].record() for key in question.snippets],
        "txt_negFacts": [snippet.record() for snippet in question.txt_negatives],
    }


def build_records(world: World, rng: random.Random, questions: list[Question]) -> dict[str, Record]:
    rng.shuffle(questions)
    used_images = {key for q in questions for key in q.images}
    used_snippets = {key for q in questions for key in q.snippets}
    for question in questions:
        question.img_negatives = image_negatives(world, rng, question, used_images)
        question.txt_negatives = text_negatives(world, rng, question, used_snippets)
        used_images.update(image.key for image in question.img_negatives)
        used_snippets.update(snippet.key for snippet in question.txt_negatives)
    cover_unused(world, questions)
    records: dict[str, Record] = {}
    for index, question in enumerate(questions):
        guid = f"{rng.getrandbits(128):032x}"
        split = "train" if index % TRAIN_EVERY == TRAIN_EVERY - 1 else "val"
        records[guid] = question_record(world, question, guid, split, rng)
    return records


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise RuntimeError(f"sample check failed: {message}")


def _fact_ids(records: dict[str, Record], names: Sequence[str], key: str) -> set[Any]:
    return {fact[key] for record in records.values() for name in names for fact in record[name]}


def check_sample(records: dict[str, Record], world: World) -> None:
    """Fail loudly rather than ship a sample that breaks what its README promises."""
    qcates = {qcate: sum(r["Qcate"] == qcate for r in records.values()) for qcate in QCATES}
    _require(min(qcates.values()) >= 5 and qcates["text"] >= 10, f"Qcate counts {qcates}")
    _require(sum(r["split"] == "val" for r in records.values()) >= 40, "fewer than 40 val")
    image_ids = _fact_ids(records, ("img_posFacts", "img_negFacts"), "image_id")
    snippet_ids = _fact_ids(records, ("txt_posFacts", "txt_negFacts"), "snippet_id")
    _require(image_ids == {i.image_id for i in world.images.values()}, "unreferenced images")
    _require(snippet_ids == {s.snippet_id for s in world.snippets.values()}, "orphan snippets")
    _require(len(image_ids) >= 110 and len(snippet_ids) >= 190, "too few sources")
    truncated = world.images[TRUNCATED_KEY].image_id
    _require(truncated in _fact_ids(records, ("img_negFacts",), "image_id"), "truncated unused")
    _require(truncated not in _fact_ids(records, ("img_posFacts",), "image_id"), "truncated gold")
    yes_no = {r["Keywords_A"] for r in records.values() if r["Qcate"] == "YesNo"}
    _require(yes_no == {"yes", "no"}, "YesNo needs both answers")
    for guid, record in records.items():
        text = record["Qcate"] == "text"
        _require(
            bool(record["txt_posFacts"]) == text and bool(record["img_posFacts"]) != text,
            f"{guid}: gold modality does not match Qcate",
        )
        for name in ("img_negFacts", "txt_negFacts"):
            _require(MIN_NEGATIVES <= len(record[name]) <= MAX_NEGATIVES, f"{guid}: {name}")


# Questions no source answers, so that declining is measured, not assumed: some about things
# the corpus never mentions, most about its own entities, asking what no caption or snippet
# records (who owns an inn, when a shop closes), which a model that guesses gets wrong.
OUT_OF_CORPUS = (
    "Who won the 1998 football world cup?",
    "What is the capital of Australia?",
    "How many moons does Jupiter have?",
    "Who wrote the novel Moby-Dick?",
)
# Near misses: a source names the thing and says something else about it (a door's colour, not
# its painter; a cafe's opening, not its closing), the trap for extractive answers.
NEAR_MISSES = {
    "Harbor Inn": "Who painted the door of the Harbor Inn?",
    "Dunmore": "How tall is the lighthouse of Dunmore in metres?",
    "Moonlight Cafe": "When did the Moonlight Cafe close?",
    # Attributes no source gives of a thing the sources describe (its door, not its roof).
    "Anchor Hotel": "What colour is the roof of the Anchor Hotel?",
    "Crown Inn": "What is the name of the cat at the Crown Inn?",
    "Gull Tavern": "What is the roof of the Gull Tavern made of?",
    "Kingfisher Hotel": "What colour are the shutters of the Kingfisher Hotel?",
}
UNRECORDED = {  # entity group -> a question about something the world never records
    "lodging": "Who owns {the}?",
    "shop": "What time does {the} close on Sundays?",
    "bridge": "How much does it cost to cross {the}?",
    "boat": "Who is the captain of the fishing boat {name}?",
    "festival": "How many tickets were sold for {the} last year?",
    "town": "What is the phone number of the town hall in {name}?",
}


def unanswerable_questions(world: World) -> list[dict[str, str | None]]:
    """Two questions per group of `UNRECORDED` (its first entities by name), the near misses,
    then questions about what the corpus never mentions."""
    questions: list[dict[str, str | None]] = []
    for group, template in UNRECORDED.items():
        names = sorted(name for name, of in world.group.items() if of == group)[:2]
        for name in names:
            text = template.format(the=_the(name), name=name)
            questions.append({"question": _cap(text), "about": name})
    for name, text in NEAR_MISSES.items():
        _require(name in world.group, f"near miss about {name!r}, which the corpus lacks")
        questions.append({"question": text, "about": name})
    questions += [{"question": text, "about": None} for text in OUT_OF_CORPUS]
    return questions


def write_json(path: Path, records: dict[str, Record]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        json.dump(records, handle, indent=1, ensure_ascii=False, sort_keys=False)
        handle.write("\n")


def write_images(tsv_path: Path, lineidx_path: Path, images: Sequence[ImageFact]) -> None:
    """imgs.tsv line n holds image IMAGE_ID_BASE + n, so `lineidx[id % 10_000_000]` finds it."""
    offsets: list[int] = []
    position = 0
    with tsv_path.open("wb") as tsv:
        for row, image in enumerate(sorted(images, key=lambda i: i.image_id)):
            assert image.image_id == IMAGE_ID_BASE + row
            line = f"{image.image_id}\t".encode() + base64.b64encode(image.jpeg()) + b"\n"
            offsets.append(position)
            tsv.write(line)
            position += len(line)
    lineidx_path.write_text("".join(f"{offset}\n" for offset in offsets), encoding="ascii")


def _bullet(text: str) -> str:
    return textwrap.fill(text, width=96, initial_indent="- ", subsequent_indent="  ") + "\n"


def readme_text(records: dict[str, Record], world: World) -> str:
    """The README is generated too, so its counts and the truncated id can never go stale."""
    counts = {q: sum(r["Qcate"] == q for r in records.values()) for q in QCATES}
    val = sum(r["split"] == "val" for r in records.values())
    truncated = world.images[TRUNCATED_KEY]
    first, last = IMAGE_ID_BASE, IMAGE_ID_BASE + len(world.images) - 1
    header = (
        "# WebQA-format sample corpus\n\n"
        "Generated by `python data/make_sample.py`: do not edit by hand, rerun the script (its\n"
        "output is byte-identical across runs on the same Pillow/libjpeg build).\n\n"
        "A small fictional world (six towns with inns, shops, provincial flags, coats of arms,\n"
        "towers and lighthouses, parks, festivals, churches, bridges and fishing boats) in the\n"
        "exact layout of the WebQA release, for tests and demos that cannot ship its 51 GB of\n"
        "images.\n\n"
        "| file | content |\n| --- | --- |\n"
        f"| `WebQA_sample.json` | {len(records)} questions in one JSON object keyed by Guid "
        f"({val} `val`, {len(records) - val} `train`) |\n"
        f"| `imgs.tsv` | {len(world.images)} images, one line each: "
        "`image_id<TAB>base64(JPEG)` |\n"
        "| `imgs.lineidx` | byte offset of each `imgs.tsv` line; image `i` is on line "
        "`i % 10_000_000` |\n"
        f"| `unanswerable.json` | {len(unanswerable_questions(world))} questions no source "
        "answers (not in WebQA's format: WebQA has none) |\n\n"
        "| Qcate | " + " | ".join(QCATES) + " |\n"
        "| --- |" + " --- |" * len(QCATES) + "\n"
        "| questions | " + " | ".join(str(counts[q]) for q in QCATES) + " |\n\n"
    )
    bullets = [
        "`text` questions have 1-2 gold snippets (`txt_posFacts`); all others have gold images "
        "(`img_posFacts`: one, or two for `choose`). Every question also has 5-12 image and 5-12 "
        "text distractors.",
        f"Sources: {len(world.images)} images (ids {first}-{last}) and {len(world.snippets)} "
        "snippets, each referenced by at least one question. A source can be one question's gold "
        "and another's distractor: de-duplicate by id.",
        f"Images are {WIDTH}x{HEIGHT} JPEGs (quality {JPEG_QUALITY}) drawn from the same "
        "attributes the captions and answers are written from, so answers are true in the "
        "pixels: colours, shapes, counts of 1-6 objects, painted words and numbers. Towers share "
        "one scale of 2 px per metre, so heights compare across images.",
        "As in the release, many `Q` and `A` strings are wrapped in literal double quotes.",
        f'Image `{truncated.image_id}` ("{truncated.title}") is a truncated JPEG, cut to '
        f"{int(TRUNCATE_FRACTION * 100)}% of its bytes as some release images are. It is only "
        "ever a distractor, never gold; readers must decode it leniently.",
        f"{len(PLACARDS)} images are street signs and shop fronts whose captions do not spell the "
        f"words painted on them; the {len(scene_text_questions())} questions about them (topic "
        "`street signs`) are found or answered only through that text: index with `--ocr`.",
        f"`unanswerable.json` lists {len(unanswerable_questions(world))} questions that no "
        "caption or snippet answers: most about the corpus's own inns, shops, bridges, boats, "
        "festivals and towns (`about` names the entity), asking what the world never records, "
        "and a few about nothing in it (`about` is null). mmrag should decline them all.",
    ]
    return header + "".join(_bullet(text) for text in bullets)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "sample",
        help="output directory (default: data/sample beside this script)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    out: Path = parse_args(argv).out
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    world = build_world(rng)
    world.images[TRUNCATED_KEY].truncated = True
    records = build_records(world, rng, all_questions(world))
    build_placards(world)
    records.update(scene_text_records(world, random.Random(SCENE_SEED)))
    check_sample(records, world)
    write_json(out / "WebQA_sample.json", records)
    unanswerable = unanswerable_questions(world)
    (out / "unanswerable.json").write_text(
        json.dumps({"questions": unanswerable}, indent=2) + "\n", encoding="utf-8"
    )
    write_images(out / "imgs.tsv", out / "imgs.lineidx", list(world.images.values()))
    (out / "README.md").write_text(readme_text(records, world), encoding="utf-8")
    size = sum(path.stat().st_size for path in out.iterdir() if path.is_file())
    print(
        f"{out}: {len(records)} questions, {len(world.images)} images, "
        f"{len(world.snippets)} snippets, {size} bytes"
    )


if __name__ == "__main__":
    main()
