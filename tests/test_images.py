"""imgs.tsv random access through imgs.lineidx, and tolerance of truncated JPEGs."""

from __future__ import annotations

import pytest

from indexes.errors import InputError
from indexes.images import (
    DirectoryImageStore,
    ImageNotFound,
    WebQAImageStore,
    decode_image,
    image_media_type,
)
from tests.conftest import jpeg_bytes, write_imgs_tsv


def test_lineidx_seeks_each_image_regardless_of_file_order(tmp_path):
    images = {30000000 + i: jpeg_bytes(color) for i, color in enumerate(["red", "green", "blue"])}
    store = WebQAImageStore(write_imgs_tsv(tmp_path, images))
    assert len(store) == 3
    for image_id, data in images.items():
        assert store.read_bytes(str(image_id)) == data
    pixel = decode_image(store.read_bytes("30000002")).getpixel((16, 12))
    assert pixel[2] > 200 and pixel[0] < 60


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
    store = DirectoryImageStore(tmp_path / "root")
    assert store.read_bytes("a.jpg") == b"x"
    with pytest.raises(ImageNotFound):
        store.read_bytes("../secret.txt")
