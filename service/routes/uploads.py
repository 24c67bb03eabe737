"""What routes taking an uploaded image share: decoding happens after admission, in the thread
pool (never on the event loop that answers every other client), and an image that is too large
or does not decode is a 422 with the reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from fastapi import HTTPException
from fastapi.concurrency import run_in_threadpool

from mmrag.indexes.errors import InputError

T = TypeVar("T")

IMAGE_PART = {
    "type": "string",
    "format": "binary",
    "description": "JPEG, PNG, GIF, BMP, TIFF or WebP, within the service's max_image_pixels",
}


async def checked_image(work: Callable[..., T], *args: object) -> T:
    """`work(*args)` on an uploaded image, in the thread pool; its InputError becomes a 422."""
    try:
        return await run_in_threadpool(work, *args)
    except InputError as exc:
        raise HTTPException(422, str(exc)) from None
