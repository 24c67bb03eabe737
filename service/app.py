"""The FastAPI application factory: state is loaded once per process and held on `app.state`."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from indexes.collection import Collection
from indexes.errors import InputError
from retrieval.hybrid import HybridRetriever
from service.config import Settings
from service.schemas import Health, SearchHit, SearchRequest, SearchResponse

CAPTIONS_ONLY = "none: no CLIP checkpoint configured, images are reached through their captions"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.retriever = HybridRetriever(
            Collection(settings.index), settings.retrievers, settings.fusion
        )
        yield

    app = FastAPI(title="mmrag", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings

    @app.get("/healthz", response_model=Health)
    async def healthz(request: Request) -> Health:
        retriever: HybridRetriever = request.app.state.retriever
        return Health(
            status="ok",
            sources=len(retriever.collection.store),
            retrievers=retriever.retrievers,
            fusion=retriever.fusion,
            image_vectors="clip" if retriever.collection.has_clip else CAPTIONS_ONLY,
        )

    @app.post("/v1/search", response_model=SearchResponse)
    async def search(body: SearchRequest, request: Request) -> SearchResponse:
        if len(body.question) > settings.max_question_chars:
            raise HTTPException(
                422, f"question longer than {settings.max_question_chars} characters"
            )
        if body.k > settings.max_k:
            raise HTTPException(422, f"k must be at most {settings.max_k}")
        started = time.perf_counter()
        try:
            candidates = await run_in_threadpool(
                request.app.state.retriever.search, body.question, body.k, body.modality
            )
        except InputError as exc:
            raise HTTPException(422, str(exc)) from None
        return SearchResponse(
            hits=[SearchHit.from_candidate(c) for c in candidates],
            took_ms=(time.perf_counter() - started) * 1000,
        )

    return app
