"""GET /v1/sources/{id} and its image: only ids in the corpus, never paths from the client."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool

from indexes.images import ImageNotFound, image_media_type
from service.schemas import SourceOut

router = APIRouter()


@router.get("/v1/sources/{source_id}", response_model=SourceOut)
async def source(source_id: str, request: Request) -> SourceOut:
    found = request.app.state.pipeline.retriever.collection.store.find(source_id)
    if found is None:
        raise HTTPException(404, f"no source with id {source_id!r}")
    return SourceOut.from_source(found)


@router.get("/v1/sources/{source_id}/image")
async def source_image(source_id: str, request: Request) -> Response:
    collection = request.app.state.pipeline.retriever.collection
    found = collection.store.find(source_id)
    if found is None or found.modality != "image" or collection.images is None:
        raise HTTPException(404, f"no image source with id {source_id!r}")
    try:
        data = await run_in_threadpool(collection.images.read_bytes, found.image_ref)
    except ImageNotFound:
        raise HTTPException(404, f"the image of source {source_id!r} is missing") from None
    return Response(
        data, media_type=image_media_type(data), headers={"Cache-Control": "public, max-age=86400"}
    )
