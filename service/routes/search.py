"""POST /v1/search: ranked sources for a question, no generation."""

from __future__ import annotations

import time

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from mmrag.indexes.errors import InputError
from mmrag.service.routes.common import ERRORS, check_search_request
from mmrag.service.schemas import SearchHit, SearchRequest, SearchResponse

router = APIRouter()


@router.post("/v1/search", response_model=SearchResponse, responses=ERRORS)
async def search(body: SearchRequest, request: Request) -> SearchResponse:
    check_search_request(request, body)
    retriever = request.app.state.pipeline.retriever
    async with request.app.state.search_queue.slot():
        started = time.perf_counter()
        try:
            candidates = await run_in_threadpool(
                retriever.search, body.question, body.k, body.modality
            )
        except InputError as exc:
            raise HTTPException(422, str(exc)) from None
        took = time.perf_counter() - started
    request.app.state.metrics.observe_stages({"retrieve_s": took})
    return SearchResponse(
        hits=[SearchHit.from_candidate(c) for c in candidates], took_ms=took * 1000
    )
