"""POST /v1/ground: one box around what answers a question about an uploaded image."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, HTTPException, Request, UploadFile
from fastapi.concurrency import run_in_threadpool

from mmrag.generation.errors import GenerationError
from mmrag.generation.grounding import Grounding
from mmrag.indexes.images import decode_image
from mmrag.service.routes.common import ERRORS, check_question_length, error, settings_of
from mmrag.service.routes.uploads import checked_image
from mmrag.service.schemas import GroundResponse

router = APIRouter()

NOT_CONFIGURED = {404: error("grounding is not configured: the service has no detector")}


@router.post("/v1/ground", response_model=GroundResponse, responses={**ERRORS, **NOT_CONFIGURED})
async def ground(
    request: Request,
    question: Annotated[str, Form(min_length=1)],
    image: Annotated[UploadFile, File(description="JPEG or PNG")],
) -> GroundResponse:
    """The box (in the image's pixels) of the object that answers the question. A box that
    cannot be found (the generator failed, a reply without a box) is `box: null` with `error`
    saying why: the request was fine, the models found nothing."""
    check_question_length(request, question)
    state = request.app.state
    citation_grounder = state.pipeline.grounder
    if citation_grounder is None:
        raise HTTPException(
            404, "grounding is not configured: start the service with --detector NAME_OR_PATH"
        )
    grounder = citation_grounder.grounder
    # Admitted first: reading and decoding an image costs memory and CPU (see routes.uploads).
    async with state.answer_queue.slot():
        data = await image.read()
        pixels = await checked_image(decode_image, data, settings_of(request).max_image_pixels)
        try:
            found = await run_in_threadpool(grounder.locate, data, question)
        except GenerationError as exc:
            found = Grounding(None, "", str(exc))
    return GroundResponse.from_grounding(found, grounder.strategy, pixels.size)
