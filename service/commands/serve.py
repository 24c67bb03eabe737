"""`mmrag serve`: the HTTP API with uvicorn."""

from __future__ import annotations

import argparse
import contextlib
import os

from mmrag.core.options import add_pipeline_options, setting_flag, settings_from

# On SIGTERM, requests in flight get this long to finish; then their connections are closed.
GRACEFUL_SHUTDOWN_S = 5


def register(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser("serve", help="start the HTTP service")
    for name in ("index", "host", "port", "workers"):
        setting_flag(serve, name)
    add_pipeline_options(serve)
    serve.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from mmrag.core.components import build_pipeline
    from mmrag.service.app import create_app, stop_answers
    from mmrag.service.protocol import ClientLimits, protocol_for

    settings = settings_from(args)
    if settings.workers > 1 and settings.torch_threads is None:
        # Each process would otherwise start a thread per core and they would fight over them.
        settings = settings.model_copy(
            update={"torch_threads": max(1, (os.cpu_count() or 1) // settings.workers)}
        )
    # Build once up front: bad settings fail here as one line, before uvicorn starts.
    pipeline = build_pipeline(settings)
    if settings.workers == 1:
        app = create_app(settings, pipeline)
        config = uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            log_level="info",
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
            http=protocol_for(ClientLimits.of(settings)),
        )

        class Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: object) -> None:
                stop_answers(app)  # the streams in flight end now, with their answer's end
                super().handle_exit(sig, frame)

        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a server is stopped
            Server(config).run()
        return 0
    # Python holds the GIL for the request handling around the models, so one process uses
    # about one core; workers rebuild the pipeline from these settings in their own process.
    del pipeline
    os.environ.update(settings.to_env())
    uvicorn.run(
        "mmrag.service.app:create_app",
        factory=True,
        workers=settings.workers,
        host=settings.host,
        port=settings.port,
        log_level="info",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        http=protocol_for(ClientLimits.of(settings)),
    )
    return 0
