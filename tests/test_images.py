"""imgs.tsv random access through imgs.lineidx, tolerance of truncated JPEGs, and corrupt rows
found at build (counted) and when served (404/422, never 500)."""

from __future__ import annotations

import base64
import io
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from PIL import Image

from mmrag.indexes.collection import Collection, build_index
from mmrag.indexes.encoders.base import EncoderInfo, l2_normalise
from mmrag.indexes.errors import InputError
from mmrag.indexes.images import (
    CorruptImage,
    DirectoryImageStore,
    ImageNotFound,
    WebQAImageStore,
    decode_image,
    image_media_type,
)
from mmrag.service.routes import sources
from tests.helpers import image_fact, jpeg_bytes, write_imgs_tsv

COLORS = ["red", "green", "blue", "teal", "olive", "navy", "maroon", "purple"]


def test_lineidx_seeks_each_image_regardless_of_file_order(tmp_path):
    images = {30000000 + i: jpeg_bytes(color) for i, color in enumerate(["red", "green", "blue"])}
    store = WebQAImageStore(write_imgs_tsv(tmp_path, images))
    assert len(store) == 3
    for image_id, data in images.items():
        assert store.read_bytes(str(image_id)) == data
    pixel = decode_image(store.read_bytes("30000002")).getpixel((16, 12))
    assert pixel[2] > 200 and pixel[0] < 60


def test_rows_read_in_parallel_are_each_their_own(tmp_path):
    """Eight threads read every row at once, each in its own order: with no lock and no shared
    file position (`os.pread`), each gets its own row's bytes."""
    images = {30000000 + i: jpeg_bytes(color, (40 + i, 30)) for i, color in enumerate(COLORS)}
    store = WebQAImageStore(write_imgs_tsv(tmp_path, images))
    refs = [str(image_id) for image_id in images] * 4

    def read(seed: int) -> list[tuple[str, bytes]]:
        order = np.random.default_rng(seed).permutation(len(refs))
        return [(refs[i], store.read_bytes(refs[i])) for i in order]

    with ThreadPoolExecutor(8) as pool:
        for reads in pool.map(read, range(8)):
            assert all(data == images[int(ref)] for ref, data in reads)


def test_a_row_ends_at_its_newline_whatever_the_lineidx_skips(tmp_path):
    """A row runs to the next listed offset; should the lineidx skip a row, or end a line with
    CRLF, or the file lack its last newline, the row still ends where its line does."""
    red, blue = jpeg_bytes("red"), jpeg_bytes("blue")
    rows = [
        b"30000000\t" + base64.b64encode(red) + b"\r\n",
        b"39999999\t" + base64.b64encode(blue) + b"\n",  # a row the lineidx does not list
        b"30000001\t" + base64.b64encode(blue),
    ]
    tsv = tmp_path / "imgs.tsv"
    tsv.write_bytes(b"".join(rows))
    (tmp_path / "imgs.lineidx").write_text(f"0\n{len(rows[0]) + len(rows[1])}\n")
    store = WebQAImageStore(tsv)
    assert store.read_bytes("30000000") == red
    assert store.read_bytes("30000001") == blue
    store.probe("30000000")


def test_truncated_jpeg_still_decodes(tmp_path):
    whole = jpeg_bytes("red", size=(128, 96))
    store = WebQAImageStore(write_imgs_tsv(tmp_path, {30000000: whole[: len(whole) * 6 // 10]}))
    image = decode_image(store.read_bytes("30000000"))
    assert image.size == (128, 96)
    assert image.getpixel((2, 2))[0] > 200


def test_unknown_ids_are_refused(tmp_path):
    store = WebQAImageStore(write_imgs_tsv(tmp_path, {30000000: jpeg_bytes("red")}))
    with pytest.raises(ImageNotFound):
        store.read_bytes("30000007")
    with pytest.raises(ImageNotFound):
        store.read_bytes("40000000")  # same row as 30000000, different id
    with pytest.raises(ImageNotFound):
        store.read_bytes("../etc/passwd")


def test_garbage_is_not_an_image():
    with pytest.raises(InputError, match="undecodable image"):
        decode_image(b"not an image at all")


def test_media_type_from_magic_bytes():
    assert image_media_type(jpeg_bytes("red")) == "image/jpeg"
    assert image_media_type(b"\x89PNG\r\n") == "image/png"


def test_directory_store_refuses_paths_outside_its_root(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "a.jpg").write_bytes(b"x")
    (tmp_path / "secret.txt").write_text("s")
    (tmp_path / "root" / "pics").mkdir()
    (tmp_path / "root" / "pics" / "b.jpg").write_bytes(b"y")
    (tmp_path / "root" / "pics" / "inside.jpg").symlink_to(tmp_path / "root" / "a.jpg")
    (tmp_path / "root" / "pics" / "out.jpg").symlink_to(tmp_path / "secret.txt")
    (tmp_path / "root" / "away").symlink_to(tmp_path, target_is_directory=True)
    store = DirectoryImageStore(tmp_path / "root")
    assert store.read_bytes("a.jpg") == b"x"
    assert store.read_bytes("pics/b.jpg") == b"y"
    assert store.read_bytes("pics/inside.jpg") == b"x"  # a link that stays inside is followed
    # Each way out: a parent reference, an absolute path, a linked file, a linked folder,
    # asked twice (a folder is resolved once and remembered).
    for ref in ["../secret.txt", str(tmp_path / "secret.txt"), "pics/out.jpg", "away/secret.txt"]:
        for _ in range(2):
            with pytest.raises(ImageNotFound):
                store.read_bytes(ref)
    for missing in ["pics/none.jpg", "pics", "pics/..", "."]:
        with pytest.raises(ImageNotFound):
            store.read_bytes(missing)


GOOD, BAD_BASE64_HEAD, NOT_AN_IMAGE, WRONG_KEY, BAD_BASE64_DEEP, JUNK_AFTER_SIGNATURE = range(
    30000000, 30000006
)


def corrupt_imgs_tsv(folder: Path) -> Path:
    """One good image and each way a row can be broken, offsets kept valid (same lengths)."""
    junk = b"\xff\xd8" + bytes(range(256)) * 4
    images = {image_id: jpeg_bytes("red", size=(64, 48)) for image_id in range(GOOD, GOOD + 6)}
    images[NOT_AN_IMAGE] = b"<html>not an image</html>"
    images[JUNK_AFTER_SIGNATURE] = junk
    tsv = write_imgs_tsv(folder, images)
    lines = tsv.read_bytes().splitlines(keepends=True)
    for i, line in enumerate(lines):
        key, _, payload = line.partition(b"\t")
        if key == str(BAD_BASE64_HEAD).encode():
            payload = b"!!!!" + payload[4:]
        elif key == str(BAD_BASE64_DEEP).encode():
            payload = payload[:400] + b"!!!!" + payload[404:]
        elif key == str(WRONG_KEY).encode():
            key = b"30000009"
        lines[i] = key + b"\t" + payload
    tsv.write_bytes(b"".join(lines))
    return tsv


def test_probe_finds_broken_rows_cheaply_and_passes_truncated_images(tmp_path):
    store = WebQAImageStore(corrupt_imgs_tsv(tmp_path))
    store.probe(str(GOOD))
    for image_id in (BAD_BASE64_HEAD, NOT_AN_IMAGE):
        with pytest.raises(CorruptImage, match=f"image {image_id}"):
            store.probe(str(image_id))
    with pytest.raises(ImageNotFound):
        store.probe(str(WRONG_KEY))
    store.probe(str(BAD_BASE64_DEEP))  # only the head is read: found when the bytes are used
    with pytest.raises(CorruptImage, match="corrupt base64"):
        store.read_bytes(str(BAD_BASE64_DEEP))
    whole = jpeg_bytes("red", size=(128, 96))
    truncated = WebQAImageStore(write_imgs_tsv(tmp_path, {GOOD: whole[: len(whole) // 2]}))
    truncated.probe(str(GOOD))


class StubClip:
    """Pixels in, constant vectors out: what is under test is which images decoded."""

    info = EncoderInfo(kind="clip", name="stub", backend="test", dim=4)

    def preprocess(self, images: list) -> np.ndarray:
        return np.zeros((len(images), 3, 4, 4), np.float32)

    def encode_pixels(self, pixels: np.ndarray) -> np.ndarray:
        return l2_normalise(np.ones((len(pixels), 4)))

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        return l2_normalise(np.ones((len(texts), 4)))


def corrupt_corpus(folder: Path) -> Path:
    facts = [image_fact(i, f"photo {i}", f"a photo numbered {i}") for i in range(GOOD, GOOD + 6)]
    record = {"Q": "q", "A": ["a"], "img_posFacts": facts, "txt_posFacts": []}
    path = folder / "WebQA_corrupt.json"
    path.write_text(json.dumps({"q1": record}))
    return path


def test_build_counts_unreadable_images_instead_of_failing(tmp_path):
    corpus, tsv = corrupt_corpus(tmp_path), corrupt_imgs_tsv(tmp_path)
    report = build_index([corpus], tmp_path / "idx", images=tsv)
    assert report.unreadable_images == 3  # bad base64 head, not an image, wrong key
    assert "; 3 images unreadable)" in report.summary()
    assert Collection(tmp_path / "idx").manifest["images"]["unreadable"] == 3
    with_clip = build_index([corpus], tmp_path / "clip", images=tsv, clip=StubClip())
    assert with_clip.unreadable_images == 5  # CLIP decodes every image and finds two more


def test_image_route_answers_404_or_422_never_500(tmp_path):
    build_index([corrupt_corpus(tmp_path)], tmp_path / "idx", images=corrupt_imgs_tsv(tmp_path))
    app = FastAPI()
    app.include_router(sources.router)
    retriever = SimpleNamespace(collection=Collection(tmp_path / "idx"))
    app.state.pipeline = SimpleNamespace(retriever=retriever)
    with TestClient(app, raise_server_exceptions=False) as client:
        good = client.get(f"/v1/sources/{GOOD}/image")
        assert (good.status_code, good.headers["content-type"]) == (200, "image/jpeg")
        assert client.get(f"/v1/sources/{WRONG_KEY}/image").status_code == 404
        assert client.get("/v1/sources/nope/image").status_code == 404
        for image_id in (BAD_BASE64_HEAD, BAD_BASE64_DEEP, NOT_AN_IMAGE):
            reply = client.get(f"/v1/sources/{image_id}/image")
            assert reply.status_code == 422, reply.text
            assert f"the image of source '{image_id}' is corrupt" in reply.json()["detail"]


def image_bytes(image: Image.Image, format: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=format, **options)
    return buffer.getvalue()


@pytest.mark.parametrize("format", ["TGA", "PCX", "SGI", "DDS"])
def test_only_the_documented_formats_are_decoded(format: str):
    """Pillow opens a dozen formats beyond the six the service documents: each one more
    parser an upload could reach."""
    data = image_bytes(Image.new("RGB", (64, 64), "red"), format)
    assert Image.open(io.BytesIO(data)).size == (64, 64)  # Pillow itself would read it
    with pytest.raises(CorruptImage, match="not a JPEG, PNG, GIF, BMP, TIFF or WebP"):
        decode_image(data)


def test_a_photo_is_decoded_upright_as_its_exif_orientation_says():
    landscape = Image.new("RGB", (40, 20), "red")
    exif = landscape.getexif()
    exif[0x0112] = 6  # the camera was turned a quarter to the right
    photo = decode_image(image_bytes(landscape, "JPEG", exif=exif.tobytes()))
    assert photo.size == (20, 40)
