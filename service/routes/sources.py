"""GET /v1/sources/{id} and its image: only ids in the corpus, never paths from the client.

A missing image is 404; stored bytes that are not an image (bad base64, no image signature)
are 422 with the reason: the source exists, its image is unusable, and the server is fine.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool

from mmrag.indexes.errors import InputError
from mmrag.indexes.images import ImageNotFound, image_media_type
from mmrag.service.routes.common import NOT_FOUND, error, quoted
from mmrag.service.schemas import SourceOut

router = APIRouter()


@router.get("/v1/sources/{source_id}", response_model=SourceOut, responses=NOT_FOUND)
async def source(source_id: str, request: Request) -> SourceOut:
    found = request.app.state.pipeline.retriever.collection.store.find(source_id)
    if found is None:
        raise HTTPException(404, f"no source with id {quoted(source_id)}")
    return SourceOut.from_source(found)


@router.get(
    "/v1/sources/{source_id}/image",
    responses={**NOT_FOUND, 422: error("the stored image is corrupt; the detail says how")},
)
async def source_image(source_id: str, request: Request) -> Response:
    collection = request.app.state.pipeline.retriever.collection
    found = collection.store.find(source_id)
    if found is None or found.modality != "image" or collection.images is None:
        raise HTTPException(404, f"no image source with id {quoted(source_id)}")
    try:
        data = await run_in_threadpool(collection.images.read_bytes, found.image_ref)
        media_type = image_media_type(data)
    except ImageNotFound:
        raise HTTPException(404, f"the image of source {quoted(source_id)} is missing") from None
    except InputError as exc:
        raise HTTPException(
            422, f"the image of source {quoted(source_id)} is corrupt: {exc}"
        ) from None
    return Response(data, media_type=media_type, headers={"Cache-Control": "public, max-age=86400"})
