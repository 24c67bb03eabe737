"""`mmrag serve`: the HTTP API with uvicorn."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from service.commands.options import add_pipeline_options, settings_from

# On SIGTERM, requests in flight get this long to finish; then their connections are closed.
GRACEFUL_SHUTDOWN_S = 5


def register(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser("serve", help="start the HTTP service")
    serve.add_argument("--index", type=Path, help="index directory (default: settings)")
    serve.add_argument("--host", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8000)")
    serve.add_argument("--workers", type=int, help="server processes (default 1)")
    add_pipeline_options(serve)
    serve.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from service.app import create_app
    from service.components import build_pipeline

    settings = settings_from(args)
    if settings.workers > 1 and settings.torch_threads is None:
        # Each process would otherwise start a thread per core and they would fight over them.
        settings = settings.model_copy(
            update={"torch_threads": max(1, (os.cpu_count() or 1) // settings.workers)}
        )
    # Build once up front: bad settings fail here as one line, before uvicorn starts.
    pipeline = build_pipeline(settings)
    if settings.workers == 1:
        uvicorn.run(
            create_app(settings, pipeline),
            host=settings.host,
            port=settings.port,
            log_level="info",
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        )
        return 0
    # Python holds the GIL for the request handling around the models, so one process uses
    # about one core; workers rebuild the pipeline from these settings in their own process.
    del pipeline
    os.environ.update(settings.to_env())
    uvicorn.run(
        "service.app:create_app",
        factory=True,
        workers=settings.workers,
        host=settings.host,
        port=settings.port,
        log_level="info",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    return 0
