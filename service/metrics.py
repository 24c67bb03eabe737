"""Prometheus metrics: request counts and latency per route, and per pipeline stage.

A registry per app (not the process-global one) so several apps in one process, as in tests,
never collide.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector
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
        self.dropped_streams = Counter(
            "mmrag_dropped_streams",
            "streamed answers whose client left before the end (not counted as answers)",
            registry=self.registry,
        )
        self.registry.register(REFUSED)

    def observe_stages(self, timings: dict[str, float | str]) -> None:
        for stage in STAGES:
            if f"{stage}_s" in timings:
                self.stage.labels(stage).observe(timings[f"{stage}_s"])

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class Refusals(Collector):
    """Requests the HTTP protocol refuses before any app sees them (service/protocol.py): a
    head too large (431), a head or body too slow (408), bytes that are not HTTP (400). The
    protocol serves every app of its process, so they are counted per process, and each
    app's registry reads the count (one app per process under `mmrag serve`)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[int] = collections.Counter()

    def add(self, status: int) -> None:
        self.counts[status] += 1

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "mmrag_refused_requests",
            "requests refused before routing: 400 unparsable, 408 too slow, 431 head too large",
            labels=["status"],
        )
        for status, count in sorted(self.counts.items()):
            family.add_metric([str(status)], count)
        yield family


REFUSED = Refusals()


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
