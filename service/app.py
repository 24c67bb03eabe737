"""The FastAPI application factory: the pipeline loads once per process, held on `app.state`."""

from __future__ import annotations

import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from swagger_ui_bundle import swagger_ui_path

from mmrag.core.components import build_pipeline
from mmrag.core.pipeline import QAPipeline
from mmrag.core.settings import Settings
from mmrag.service.headers import PAGE_HEADERS, NoSniff
from mmrag.service.limits import AdmissionQueue, BodySizeLimit
from mmrag.service.metrics import Metrics, MetricsMiddleware
from mmrag.service.openai_chat import error_content
from mmrag.service.routes import answer, chat, ground, health, rationale, search, sources

STATIC = Path(__file__).parent / "static"


def stop_answers(app: FastAPI) -> None:
    """Cancel every answer in flight: a stopped server closes its streams at once, each with
    the answer's end, rather than having them cut at the graceful shutdown's timeout."""
    for deadline in list(app.state.deadlines):
        deadline.cancel()


def create_app(settings: Settings | None = None, pipeline: QAPipeline | None = None) -> FastAPI:
    """`pipeline` may be built beforehand (the CLI does, to fail fast); else at start-up."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.pipeline = pipeline or await run_in_threadpool(build_pipeline, settings)
        yield

    app = FastAPI(
        title="mmrag",
        version="0.1.0",
        summary="Multimodal retrieval and cited-answer QA over image and text corpora.",
        lifespan=lifespan,
        docs_url=None,  # served below from local assets: FastAPI's page loads them from a CDN
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.started = int(time.time())  # when the served model (GET /v1/models) came up
    app.state.metrics = Metrics()
    app.state.rationale_writers = {}  # by MC choice method, built on first use
    app.state.deadlines = weakref.WeakSet()  # of the answers in flight (`stop_answers`)
    app.state.answer_queue = AdmissionQueue(
        "answering", settings.answer_concurrency, settings.answer_queue
    )
    app.state.search_queue = AdmissionQueue(
        "search", settings.search_concurrency, settings.search_queue
    )
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, server_error)
    for module in (health, search, answer, chat, rationale, ground, sources):
        app.include_router(module.router)
    # The demo chat page: GET / plus its assets under /static, so it never shadows a route.
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_api_route(
        "/",
        lambda: FileResponse(STATIC / "index.html", headers=PAGE_HEADERS),
        include_in_schema=False,
    )
    add_docs(app)
    document_limits(app, settings)
    # The last middleware added is the outermost: CORS headers go on every reply, the 413s of
    # the body limit included, and the metrics count those too.
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(NoSniff)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["content-type"],
        )
    return app


async def validation_error(_request: Request, exc: Exception) -> JSONResponse:
    """One line naming each bad field, as every other error reply does.

    FastAPI's default handler echoes the offending input back, and fails with a 500 on inputs
    JSON cannot encode (`"k": 1e400` parses to infinity).
    """
    assert isinstance(exc, RequestValidationError)
    problems = "; ".join(
        f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors()
    )
    problems = problems or "invalid request"
    if (openai := chat.openai_error_response(_request, 400, problems)) is not None:
        return JSONResponse(openai, status_code=400)  # OpenAI's status for a bad request
    return JSONResponse({"detail": problems}, status_code=422)


async def http_error(request: Request, exc: Exception) -> Response:
    """FastAPI and Starlette answer a body they cannot parse with a 400 that no route
    documents (an integer of 5,000 digits, JSON nested 100,000 deep, a multipart form with a
    bad boundary or too many fields): it is an invalid request, a 422 naming the problem."""
    assert isinstance(exc, StarletteHTTPException)
    cause = exc.__cause__
    unparsed = exc.status_code == 400 and cause is not None  # FastAPI's: no parser took it
    why = f"{type(cause).__name__}: {cause}" if unparsed else str(exc.detail)
    openai = chat.openai_error_response(request, exc.status_code, _body_problem(why, unparsed))
    if openai is not None:  # the OpenAI routes answer in OpenAI's shape, 400 included
        return JSONResponse(openai, status_code=exc.status_code, headers=exc.headers)
    if exc.status_code == 400:
        exc = StarletteHTTPException(422, _body_problem(why, True), exc.headers)
    return await http_exception_handler(request, exc)


async def server_error(request: Request, exc: Exception) -> JSONResponse:
    """A failure no route expected: a 500 in the shape its route's errors have (OpenAI's on
    the chat routes: a plain-text "Internal Server Error" broke its clients' error handling).
    Starlette logs the exception after this reply."""
    why = f"internal error ({type(exc).__name__}); the server's log has the details"
    return JSONResponse(error_content(request.url.path, 500, why), status_code=500)


def _body_problem(why: str, of_the_body: bool) -> str:
    return f"body: {' '.join(why.split())[:300]}" if of_the_body else why


def document_limits(app: FastAPI, settings: Settings) -> None:
    """Publish this service's own limits in its schema, so a client (or a fuzzer) that keeps
    to the schema is never refused: they are settings, so the static models cannot say them."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            limits = {
                "question": ("maxLength", settings.max_question_chars),
                "k": ("maximum", settings.max_k),
                "max_sources": ("maximum", settings.max_sources_limit),
                "conversation": ("maxItems", settings.max_turns),
                "messages": ("maxItems", settings.max_turns),
                "content": ("maxLength", settings.max_message_chars),
            }
            for model in _object_schemas(schema):
                for name, field in model.get("properties", {}).items():
                    if name in limits:
                        key, value = limits[name]
                        kinds = ("array",) if key == "maxItems" else ("string", "integer")
                        for variant in field.get("anyOf", [field]):
                            if variant.get("type") in kinds:
                                variant[key] = value
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _object_schemas(schema: Any) -> list[dict[str, Any]]:
    """Every object schema in the document, nested ones (a conversation's turns, /v1/answer's
    bodies declared inline) included."""
    found = []
    if isinstance(schema, dict):
        if "properties" in schema:
            found.append(schema)
        for value in schema.values():
            found += _object_schemas(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _object_schemas(value)
    return found


def add_docs(app: FastAPI) -> None:
    """Swagger UI at /docs from the swagger-ui-bundle package's files: nothing from a CDN."""
    app.mount("/docs/assets", StaticFiles(directory=swagger_ui_path), name="docs-assets")

    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title="mmrag API",
            swagger_js_url="/docs/assets/swagger-ui-bundle.js",
            swagger_css_url="/docs/assets/swagger-ui.css",
            swagger_favicon_url="/docs/assets/favicon-32x32.png",
        )

    app.add_api_route("/docs", docs, include_in_schema=False)
