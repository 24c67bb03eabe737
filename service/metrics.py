"""Prometheus metrics: request counts and latency per route, and per pipeline stage.

A registry per app (not the process-global one) so several apps in one process, as in tests,
never collide.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30)
# An answer's stages, from its timings; the reading of an uploaded photo, stage "ocr", is
# observed where it is read (routes/answering.py), so that it counts when no answer follows.
STAGES = ("retrieve", "rerank", "generate", "verify")


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "mmrag_requests", "HTTP requests", ["route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "mmrag_request_seconds",
            "HTTP request latency",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.stage = Histogram(
            "mmrag_stage_seconds",
            "pipeline stage latency",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.answers = Counter(
            "mmrag_answers",
            "answers by where their citations come from (model, verified, extractive, declined, "
            "unsupported)",
            ["attribution"],
            registry=self.registry,
        )
        self.generation_errors = Counter(
            "mmrag_generation_errors",
            "answers returned without a generated sentence",
            registry=self.registry,
        )

    def observe_stages(self, timings: dict[str, float]) -> None:
        for stage in STAGES:
            if f"{stage}_s" in timings:
                self.stage.labels(stage).observe(timings[f"{stage}_s"])

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Counts every response by route template (not raw path, which would explode labels)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the server sends if the app fails before its response starts

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        gone = False
        try:
            await self.app(scope, receive, recording_send)
        except ClientDisconnect:
            gone = True  # mid-body: nothing is sent, so nothing is counted nor logged as a 500
        finally:
            if not gone:
                name = getattr(scope.get("route"), "path", "unmatched")
                self.metrics.requests.labels(name, str(status)).inc()
                self.metrics.latency.labels(name).observe(time.perf_counter() - started)
