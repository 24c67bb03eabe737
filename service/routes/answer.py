"""POST /v1/answer: one cited sentence, as JSON or as server-sent events; a question about the
user's own photo comes as a multipart form with the image."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import iterate_in_threadpool
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException

from mmrag.core.pipeline import QARun
from mmrag.indexes.errors import InputError
from mmrag.service.routes.answering import (
    admit,
    answer_once,
    read_photo,
    respond,
    stream,
)
from mmrag.service.routes.common import ERRORS, check_answer_request, check_conversation
from mmrag.service.routes.uploads import IMAGE_PART
from mmrag.service.schemas import AnswerRequest, AnswerResponse

router = APIRouter()


def sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def _form_field(field: dict) -> dict:
    """A form field is text or absent, never null: `anyOf: [X, null]` becomes X."""
    if "anyOf" not in field:
        return field
    rest = {key: value for key, value in field.items() if key != "anyOf"}
    return {**rest, **field["anyOf"][0]}


def _inlined(schema: Any, definitions: dict[str, Any]) -> Any:
    """The schema with its `$defs` references replaced by what they name: a request body
    declared by hand has no `$defs` of its own in the OpenAPI document."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _inlined(definitions[schema["$ref"].rsplit("/", 1)[1]], definitions)
        return {key: _inlined(value, definitions) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_inlined(value, definitions) for value in schema]
    return schema


def _request_body() -> dict:
    """Both bodies /v1/answer takes: JSON, or a form with an image (the same fields)."""
    fields = AnswerRequest.model_json_schema()
    fields = _inlined(fields, fields.pop("$defs", {}))
    conversation = {"type": "string", "description": "the conversation as a JSON array"}
    form = {
        **fields,
        "title": "AnswerUpload",
        "properties": {
            **{name: _form_field(field) for name, field in fields["properties"].items()},
            "conversation": conversation,
            "image": IMAGE_PART,
        },
        "required": [*fields["required"], "image"],
    }
    content = {"application/json": {"schema": fields}, "multipart/form-data": {"schema": form}}
    return {"requestBody": {"required": True, "content": content}}


def is_json(content_type: str) -> bool:
    """application/json or any +json type, parameters aside (as FastAPI reads bodies)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def answer_request(request: Request) -> tuple[AnswerRequest, bytes | None]:
    """The request's fields and, from a multipart form, the image's bytes."""
    try:
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            limit = len(AnswerRequest.model_fields)
            try:
                form = await request.form(max_files=1, max_fields=limit)
            except StarletteHTTPException as exc:  # starlette's 400: too many parts, bad framing
                raise HTTPException(422, f"form: {exc.detail}") from None
            try:
                image = form.get("image")
                if not isinstance(image, UploadFile):
                    raise HTTPException(422, "image: a multipart answer needs an image file")
                fields = {k: v for k, v in form.items() if k != "image" and isinstance(v, str)}
                request_fields = AnswerRequest.model_validate(fields, context={"form": True})
                return request_fields, await image.read()
            finally:
                await form.close()
        if not is_json(request.headers.get("content-type", "")):
            # A cross-site form may post text/plain without a CORS preflight: not JSON here.
            raise HTTPException(
                422, "body: send JSON (Content-Type: application/json), or a multipart form"
            )
        # Python's parser, as for every other route: pydantic's own JSON parser rejects a
        # lone surrogate ("\\ud800") with a message that does not say so.
        data = json.loads(await request.body())
        return AnswerRequest.model_validate(data), None
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None
    except (ValueError, RecursionError) as exc:  # as FastAPI words it
        # ValueError: JSON and UTF-8 errors, and an integer past Python's 4,300 digits;
        # RecursionError: deep nesting
        why = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise HTTPException(422, f"body: JSON decode error ({why})") from None


@router.post(
    "/v1/answer",
    response_model=AnswerResponse,
    responses={200: {"content": {"text/event-stream": {}}}, **ERRORS},
    openapi_extra=_request_body(),
)
async def answer(request: Request):
    """One cited sentence. With `stream: true`, server-sent events: `token` events carry text
    deltas, then one `answer` event carries the whole response with its citations.

    Sent as a multipart form with an `image` file, the image is source [1]: the text OCR reads
    in it is the evidence (and, for engines that see images, the image itself); retrieved
    sources follow.

    One deadline (request_timeout_s, from admission) covers reading the image, retrieval,
    generation and verification; past it, or once the client has gone, the work stops.

    With `conversation` (the turns before this one), a follow-up is answered as the
    standalone question it stands for, returned as `question`."""
    body, upload = await answer_request(request)
    check_answer_request(request, body)
    check_conversation(request, body.conversation)
    options = {
        "k": body.k,
        "modality": body.modality,
        "max_sources": body.max_sources,
        "conversation": [turn.as_turn() for turn in body.conversation],
    }
    # Admitted before anything is sent: a full queue is a 429, also for streams.
    admission = await admit(request)
    if upload is not None:
        options["image"] = await read_photo(request, admission, upload)
    if body.stream:
        return stream(request, admission, body.question, options, partial(events, request=request))
    result = await answer_once(request, admission, body.question, options)
    return respond(result, request)


async def events(run: QARun, request: Request) -> AsyncIterator[str]:
    """Tokens as the run writes them, then the whole answer; a late failure is an `error`."""
    try:
        async for token in iterate_in_threadpool(iter(run)):
            yield sse("token", {"text": token})
    except InputError as exc:
        yield sse("error", {"detail": str(exc)})
        return
    assert run.result is not None
    yield sse("answer", AnswerResponse.from_result(run.result).model_dump())
