"""Grounding: box parsing and clipping, open-vocabulary detectors (tiny random OWLv2, OWL-ViT and
Grounding DINO saved like hub checkpoints and loaded by path), the two strategies and the boxes
on cited images. Random weights box nothing in particular: these tests check that every box is
in the image's pixels, the plumbing between the parts, and what bad pixels or replies give."""

from __future__ import annotations

import io
import math
import string
from pathlib import Path

import pytest
from PIL import Image

from mmrag.generation.detector import OpenVocabularyDetector
from mmrag.generation.errors import GenerationError
from mmrag.generation.grounding import (
    CitationGrounder,
    TwoStepGrounder,
    VLMGrounder,
    clip_region,
    named_object,
    open_image,
    parse_box_reply,
    qwen_grid,
)
from mmrag.generation.types import Answer, Citation
from tests.helpers import Src
from tests.openai_recorder import image_urls, recording_server
from tests.tiny_models import tiny_owl


def jpeg(size: tuple[int, int], color: str = "red") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="JPEG")
    return buffer.getvalue()


def inside(region, width: int, height: int) -> bool:
    return 0 <= region.left < region.right <= width and 0 <= region.top < region.bottom <= height


# --- parsing and clipping ---


@pytest.mark.parametrize(
    ("reply", "box", "label"),
    [
        ('```json\n[\n\t{"bbox_2d": [135, 114, 336, 289], "label": "cake"}\n]\n```', 135, "cake"),
        ('[{"bbox_2d": [10, 20, 30, 40], "label": "car"}, {"bbox_2d": [1, 2, 3, 4]}]', 10, "car"),
        ("{'bbox_2d': [10.5, 20, 30, 40], 'label': 'dog'}", 10.5, "dog"),
        ('```json\n[{"bbox_2d": [10, 20, 30, 40], "label": "bus"}, {"bbox_2d": [5, 6', 10, "bus"),
        ('The racket: {"bbox": [10, 20, 30, 40]}', 10, ""),
    ],
)
def test_the_first_box_of_a_reply_is_read(reply: str, box: float, label: str) -> None:
    coordinates, found = parse_box_reply(reply)
    assert coordinates[0] == box and len(coordinates) == 4 and found == label


@pytest.mark.parametrize(
    "reply", ["", "I cannot see any racket.", '{"bbox_2d": [1, 2, 3]}', '{"label": "car"}']
)
def test_replies_without_a_box_give_none(reply: str) -> None:
    assert parse_box_reply(reply) is None


def test_boxes_are_clipped_to_the_image_and_corners_put_in_order() -> None:
    region = clip_region((-50, 80, 120, -10), 100, 60, score=0.5, label="car")
    assert (region.left, region.top, region.right, region.bottom) == (0, 0, 100, 60)
    assert clip_region((200, 10, 300, 20), 100, 60, score=None, label="") is None  # outside
    assert clip_region((10, 10, 10, 50), 100, 60, score=None, label="") is None  # no width
    assert clip_region((math.nan, 0, 10, 10), 100, 60, score=None, label="") is None


def test_qwen_grid_is_the_processors_resize() -> None:
    assert qwen_grid(640, 480) == (644, 476)  # rounded to multiples of 28
    width, height = qwen_grid(8000, 6000)  # 48 MP, past the 12.8 MP cap: scaled down
    assert width * height <= 16384 * 28 * 28 and width % 28 == height % 28 == 0
    assert qwen_grid(20, 20) == (56, 56)  # below the minimum: scaled up


@pytest.mark.parametrize(
    ("reply", "name"),
    [
        ("The object in the image that answers the question is a car", "car"),
        ("Tennis racket.", "Tennis racket"),
        ("The answer is: skis", "skis"),
        ("The piece of cutlery used with a knife is a", ""),  # cut off: names nothing
    ],
)
def test_the_generators_sentence_is_cut_to_the_name(reply: str, name: str) -> None:
    assert named_object(reply) == name


# --- detectors ---


def tiny_grounding_dino(folder: Path) -> Path:
    """A random Grounding DINO (Swin backbone, BERT text tower) of a few layers."""
    import torch
    from transformers import (
        BertConfig,
        BertTokenizer,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoImageProcessorPil,
        GroundingDinoProcessor,
        SwinConfig,
    )

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *string.ascii_lowercase]
    words += [f"##{c}" for c in string.ascii_lowercase]
    backbone = SwinConfig(
        embed_dim=16,
        depths=[1, 1, 1, 1],
        num_heads=[1, 1, 1, 1],
        image_size=64,
        window_size=2,
        out_features=["stage2", "stage3", "stage4"],
    )
    text = BertConfig(
        vocab_size=len(words),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
    )
    config = GroundingDinoConfig(
        backbone_config=backbone,
        text_config=text,
        d_model=32,
        encoder_layers=1,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=37,
        decoder_ffn_dim=37,
        num_queries=20,
        encoder_n_points=2,
        decoder_n_points=2,
        max_text_len=32,
    )
    torch.manual_seed(0)
    GroundingDinoForObjectDetection(config).save_pretrained(folder)
    image_processor = GroundingDinoImageProcessorPil(size={"shortest_edge": 64, "longest_edge": 96})
    tokenizer = BertTokenizer(vocab={w: i for i, w in enumerate(words)}, model_max_length=32)
    GroundingDinoProcessor(image_processor, tokenizer).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module", params=["owlv2", "owlvit", "grounding-dino"])
def detector(request, tiny_owlv2: Path, tmp_path_factory) -> OpenVocabularyDetector:
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "owlv2":
        folder = tiny_owlv2
    elif request.param == "owlvit":
        tiny_owl(folder, v2=False)
    else:
        tiny_grounding_dino(folder)
    return OpenVocabularyDetector(str(folder), device="cpu")


@pytest.mark.parametrize("size", [(200, 100), (90, 160), (640, 480)])
def test_every_detector_gives_one_box_inside_the_image(detector, size) -> None:
    image = Image.open(io.BytesIO(jpeg(size)))
    region = detector.detect(image, "the red car")
    assert region is not None and inside(region, *size), region
    assert 0.0 <= region.score <= 1.0 and region.label == "the red car"
    # A long question is cut to the text tower's length, not refused.
    long_query = "what do we drive for personal use on weekends near the old harbour wall " * 3
    assert detector.detect(image, long_query) is not None
    assert detector.detect(image, "the red car") == region  # deterministic


def test_a_missing_detector_says_what_the_flag_takes(tmp_path: Path) -> None:
    with pytest.raises(GenerationError, match="OWLv2, OWL-ViT or Grounding DINO") as error:
        OpenVocabularyDetector(str(tmp_path / "nope"))
    assert "\n" not in str(error.value)


# --- the strategies ---


def test_two_step_names_the_object_then_boxes_it(smollm2, tiny_owlv2: Path) -> None:
    grounder = TwoStepGrounder(smollm2, OpenVocabularyDetector(str(tiny_owlv2), device="cpu"))
    found = grounder.locate(jpeg((320, 240)), "What do we drive for personal use?")
    assert found.error is None and inside(found.region, 320, 240)
    assert found.query and len(found.query.split()) <= 8  # the generator's few words
    assert found.region.label == found.query
    assert set(found.timings) == {"name_s", "detect_s"}
    broken = grounder.locate(b"GIF89a not really", "What do we drive?")
    assert broken.region is None and "does not decode" in broken.error


def test_two_step_shows_the_image_to_a_generator_that_sees_images(tiny_owlv2: Path) -> None:
    from mmrag.generation.engines import load_engine

    image = jpeg((320, 240))
    with recording_server(lambda _body: "a car") as server:
        engine = load_engine("openai", "vlm", base_url=server.url, accepts_images=True)
        grounder = TwoStepGrounder(engine, OpenVocabularyDetector(str(tiny_owlv2), device="cpu"))
        found = grounder.locate(image, "What do we drive?")
        (naming,) = server.chat_requests()
    assert found.query == "a car" and found.region is not None
    assert image_urls(naming) == [image_part_url(image)]


def image_part_url(data: bytes) -> str:
    from mmrag.generation.prompts import image_part

    return image_part(data)["image_url"]["url"]


def test_vlm_boxes_are_mapped_from_qwens_grid_and_clipped() -> None:
    from mmrag.generation.engines import load_engine

    replies = iter(
        [
            '```json\n[{"bbox_2d": [322, 238, 644, 476], "label": "car"}]\n```',
            '[{"bbox_2d": [600, 400, 900, 700], "label": "car"}]',  # partly outside: clipped
            '[{"bbox_2d": [700, 500, 900, 700], "label": "car"}]',  # wholly outside
            "I do not see a car.",
        ]
    )
    image = jpeg((640, 480))
    with recording_server(lambda _body: next(replies)) as server:
        engine = load_engine("openai", base_url=server.url, accepts_images=True)
        grounder = VLMGrounder(engine)
        found = [grounder.locate(image, "What do we drive?") for _ in range(4)]
        sent = server.chat_requests()
    region = found[0].region
    assert (region.left, region.top, region.right, region.bottom) == (320, 240, 640, 480)
    assert region.score is None and region.label == "car"
    assert found[1].region.right == 640 and found[1].region.bottom == 480
    assert found[2].region is None and "outside the 640x480 image" in found[2].error
    assert found[3].region is None and "no bbox_2d box" in found[3].error
    assert all(image_urls(body) == [image_part_url(image)] for body in sent)
    assert "bbox_2d" in sent[0]["messages"][-1]["content"][-1]["text"]


def test_the_vlm_strategy_needs_an_engine_that_sees_images(smollm2) -> None:
    with pytest.raises(GenerationError, match="--grounder vlm needs an engine that sees images"):
        VLMGrounder(smollm2)


# --- boxes on cited images ---


def test_cited_images_get_boxes_and_text_citations_none(smollm2, tiny_owlv2: Path) -> None:
    door = Src("30000006", "image", "Harbor Inn door", "The red door of the Harbor Inn.")
    lost = Src("30000007", "image", "Lost photo", "A photo whose bytes are gone.")
    snippet = Src("s-1", "text", "Harbor Inn", "The inn has a red door.")
    answer = Answer(
        text="The door is red [1][2][3].",
        text_without_markers="The door is red.",
        citations=[Citation(n + 1, s.id, s.modality) for n, s in enumerate([door, snippet, lost])],
        sources=[door, snippet, lost],
    )
    read: list[str] = []

    def images(source: Src) -> bytes | None:
        read.append(source.id)
        return jpeg((160, 120)) if source is door else None

    grounder = TwoStepGrounder(smollm2, OpenVocabularyDetector(str(tiny_owlv2), device="cpu"))
    grounded = CitationGrounder(grounder, images).ground("What color is the door?", answer)
    boxes = [citation.box for citation in grounded.citations]
    assert inside(boxes[0], 160, 120) and boxes[1] is None and boxes[2] is None
    assert read == ["30000006", "30000007"]  # text sources are never read as images
    assert grounded.timings["ground_s"] > 0 and grounded.text == answer.text


def test_boxes_are_found_in_the_frame_the_service_reports():
    """The service decodes a photo upright (EXIF orientation) and reports that size: the
    grounder must look at the same frame, or its box lands on a turned picture."""
    from mmrag.indexes.images import decode_image

    landscape = Image.new("RGB", (40, 20), "red")
    exif = landscape.getexif()
    exif[0x0112] = 6  # the camera was turned a quarter to the right
    buffer = io.BytesIO()
    landscape.save(buffer, format="JPEG", exif=exif.tobytes())
    assert open_image(buffer.getvalue()).size == decode_image(buffer.getvalue()).size == (20, 40)
