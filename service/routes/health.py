"""Liveness, readiness (what is loaded and reachable) and Prometheus metrics."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from mmrag.indexes.collection import Collection
from mmrag.retrieval.hybrid import HybridRetriever
from mmrag.service.schemas import Health, OcrStatus, Readiness

router = APIRouter()


def public_model_name(model: str) -> str:
    """A local model file by its name: the service's file system is nobody's business."""
    return Path(model).name if Path(model).exists() else model


def describe_ocr(collection: Collection) -> OcrStatus | None:
    """How much text the build read in the images, or None for an index built without OCR."""
    summary = collection.ocr
    if summary is None:
        return None
    return OcrStatus(**{name: summary[name] for name in OcrStatus.model_fields})


@router.get("/healthz", response_model=Health)
async def healthz(request: Request) -> Health:
    retriever: HybridRetriever = request.app.state.pipeline.retriever
    return Health(
        status="ok",
        sources=len(retriever.collection.store),
        retrievers=retriever.retrievers,
        fusion=retriever.fusion,
        image_vectors=retriever.collection.image_vectors,
        ocr=describe_ocr(retriever.collection),
    )


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(request: Request):
    """503 until the generator answers: a load balancer should not send questions before."""
    pipeline = request.app.state.pipeline
    engine = pipeline.writer.engine
    reachable = await run_in_threadpool(engine.ping)
    scorer = pipeline.selector.scorer
    body = Readiness(
        ready=reachable,
        index=pipeline.retriever.collection.root.name,
        sources=len(pipeline.retriever.collection.store),
        retrievers=pipeline.retriever.retrievers,
        fusion=pipeline.retriever.fusion,
        image_vectors=pipeline.retriever.collection.image_vectors,
        reranker=scorer.name if scorer else "calibrated retrieval scores",
        engine=engine.info.name,
        model=public_model_name(engine.info.model),
        engine_reachable=reachable,
    )
    return JSONResponse(body.model_dump(), status_code=200 if reachable else 503)


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    return Response(
        request.app.state.metrics.exposition(),
        media_type="text/plain; version=0.0.4; charset=utf-8",
    )
