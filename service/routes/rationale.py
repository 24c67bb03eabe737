"""POST /v1/rationale: A-OKVQA mode over an uploaded image or an image of this corpus."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Literal

from fastapi import APIRouter, File, Form, HTTPException, Request, UploadFile
from fastapi.concurrency import run_in_threadpool

from mmrag.generation.rationale import choices_problem
from mmrag.indexes.errors import InputError
from mmrag.indexes.images import ImageNotFound, decode_image
from mmrag.service.routes.common import (
    ERRORS,
    NOT_FOUND,
    check_question_length,
    quoted,
    settings_of,
)
from mmrag.service.routes.uploads import checked_image
from mmrag.service.schemas import RationaleResponse

router = APIRouter()


@router.post("/v1/rationale", response_model=RationaleResponse, responses={**ERRORS, **NOT_FOUND})
async def rationale(
    request: Request,
    question: Annotated[str, Form(min_length=1)],
    choices: Annotated[list[str] | None, Form()] = None,
    caption: Annotated[str | None, Form(description="for engines that cannot see images")] = None,
    choose: Annotated[Literal["similarity", "likelihood"], Form()] = "similarity",
    image: Annotated[UploadFile | None, File(description="JPEG or PNG")] = None,
    source_id: Annotated[str | None, Form(description="an image source of this corpus")] = None,
) -> RationaleResponse:
    check_question_length(request, question)
    if (problem := choices_problem(choices)) is not None:
        raise HTTPException(422, problem)
    if (image is None) == (source_id is None):
        raise HTTPException(422, "send exactly one of an image file or an image source_id")
    state = request.app.state
    collection = state.pipeline.retriever.collection
    if source_id is not None:
        found = collection.store.find(source_id)
        if found is None or found.modality != "image" or collection.images is None:
            raise HTTPException(404, f"no image source with id {quoted(source_id)}")
        caption = caption or found.text
    # Admitted first: reading and decoding an image costs memory and CPU, and happens in the
    # thread pool, never on the event loop that answers every other client.
    async with state.answer_queue.slot():
        if image is not None:
            data = await image.read()
        else:
            try:
                data = await run_in_threadpool(collection.images.read_bytes, found.image_ref)
            except ImageNotFound:
                raise HTTPException(
                    404, f"the image of source {quoted(source_id)} is missing"
                ) from None
            except InputError as exc:
                raise HTTPException(422, str(exc)) from None
        await checked_image(decode_image, data, settings_of(request).max_image_pixels)
        writer = state.rationale_writers.get(choose)
        if writer is None:
            writer = await run_in_threadpool(writer_for, state, choose)
            state.rationale_writers[choose] = writer
        result = await run_in_threadpool(
            writer.answer, question, image=data, caption=caption, choices=choices
        )
    return RationaleResponse(**asdict(result))


def writer_for(state, choose: str):
    from mmrag.core.components import build_rationale_writer

    return build_rationale_writer(state.pipeline.writer.engine, choose)
