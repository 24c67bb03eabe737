"""The FastAPI application factory: the pipeline loads once per process, held on `app.state`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from service.components import build_pipeline
from service.config import Settings
from service.limits import AdmissionQueue, BodySizeLimit
from service.metrics import Metrics, MetricsMiddleware
from service.pipeline import QAPipeline
from service.routes import answer, health, rationale, search, sources

STATIC = Path(__file__).parent / "static"


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
    )
    app.state.settings = settings
    app.state.metrics = Metrics()
    app.state.rationale_writers = {}  # by MC choice method, built on first use
    app.state.answer_queue = AdmissionQueue(
        "answering", settings.answer_concurrency, settings.answer_queue
    )
    app.state.search_queue = AdmissionQueue(
        "search", settings.search_concurrency, settings.search_queue
    )
    for module in (health, search, answer, rationale, sources):
        app.include_router(module.router)
    # The demo chat page: GET / plus its assets under /static, so it never shadows a route.
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_api_route("/", lambda: FileResponse(STATIC / "index.html"), include_in_schema=False)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["content-type"],
        )
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    return app
