"""Eval runs whose questions are answered on a Ray cluster (`--executor ray`).

A run's questions are independent, so they shard without coordination: each Ray actor builds
its own runner once (for WebQA the whole pipeline: retrieval, selection, the citation check;
for Toloka the grounder; the writer for the others; each with its generator client or an
embedded model) and answers the questions it is handed; only questions and finished records
cross the network. The generator is whatever the settings name: one shared endpoint (a vLLM
server batching every worker's requests) or an embedded model per worker. This process keeps
the checkpoint: `ClusterWork` is the `work` of `run_items`, called from its worker threads, so
records are saved in question order and a stopped run resumes exactly as a local one does.

Workers read the index and model files at the paths this process was given (relative paths
from the directory it was started in), so every node must see them there, as on any cluster
with shared storage. A worker that dies mid-run (its node lost) is not restarted: its
question goes to another worker, and the run goes on with those left. Restarting it would wait
for a free CPU that the other workers hold until the run ends.
"""

from __future__ import annotations

import math
import os
import queue
import socket
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from mmrag.evaluation.errors import EvaluationError
from mmrag.indexes.executor import EXECUTORS

T = TypeVar("T")
Work = Callable[[Any], dict[str, Any]]
WorkFactory = Callable[[], Work]
CPUS_PER_WORKER = 1  # what each worker asks of Ray; its pipeline's threads (torch, llama.cpp)


class _Worker:
    """One pipeline on one node. A failure to build it is kept and reported by `ready`, so the
    run stops with its one-line reason instead of Ray restarting a worker that cannot start."""

    def __init__(self, make_work: WorkFactory, cwd: str) -> None:
        import ray

        self.node = ray.get_runtime_context().get_node_id()
        self.host = socket.gethostname()
        self.work: Work | None = None
        self.error: str | None = None
        try:
            if os.path.isdir(cwd):
                os.chdir(cwd)  # relative paths mean what they meant where the run started
            self.work = make_work()
        except Exception as exc:  # reported to the driver, which stops the run in one line
            self.error = str(exc) or type(exc).__name__

    def ready(self) -> tuple[str, str, str | None]:
        return self.node, self.host, self.error

    def answer(self, item: Any) -> dict[str, Any]:
        assert self.work is not None
        return self.work(item)


class ClusterWork(Generic[T]):
    """`work` for `run_items` that hands each item to an idle slot of a Ray actor.

    Each actor takes `ceil(in_flight / workers)` items at once (a threaded actor, as the
    local `--concurrency` runs the same pipeline on threads), so the cluster holds `in_flight`
    questions, and a free slot, not a fixed rotation, takes the next one: a slow question
    holds up only its own slot. Use as a context manager: it joins the cluster and starts the
    workers on entry, and leaves on exit (the workers go with it)."""

    def __init__(
        self,
        make_work: WorkFactory,
        *,
        address: str | None,
        workers: int | None,
        in_flight: int,
        num_gpus: float = 0.0,
    ) -> None:
        if workers is not None and workers < 1:
            raise EvaluationError(f"--ray-workers must be at least 1, got {workers}")
        self.make_work = make_work
        self.address = address
        self.requested = workers
        self.in_flight = in_flight
        self.num_gpus = num_gpus
        self.nodes: list[str] = []  # each worker's Ray node
        self.shape: Any = None
        self._ray: Any = None
        self._slots: queue.Queue[tuple[int, Any]] = queue.Queue()  # (worker number, actor)
        self._alive: set[int] = set()
        self._lock = threading.Lock()

    def __enter__(self) -> ClusterWork[T]:
        from mmrag.indexes.ray_cluster import connect, disconnect, require_ray

        self._ray = require_ray()
        self.shape = connect(self.address)
        try:
            self._start(self._ray)
        except BaseException:
            disconnect()
            raise
        return self

    def _start(self, ray: Any) -> None:
        capacity = self.shape.gpus if self.num_gpus else self.shape.cpus
        if not capacity:
            raise EvaluationError(
                f"--device cuda: the Ray cluster has no GPU ({self.shape}); pass --device cpu "
                "or add GPU nodes"
            )
        workers = self.requested or capacity
        if workers > capacity:
            unit = "GPUs" if self.num_gpus else "CPUs"
            raise EvaluationError(
                f"--ray-workers {workers}: the Ray cluster has {capacity} {unit} "
                f"({self.shape}); each worker takes one"
            )
        self.in_flight = max(self.in_flight, workers)
        per_worker = math.ceil(self.in_flight / workers)
        actor = ray.remote(_Worker).options(
            num_cpus=CPUS_PER_WORKER,
            num_gpus=self.num_gpus,
            max_concurrency=per_worker,
        )
        actors = [actor.remote(self.make_work, os.getcwd()) for _ in range(workers)]
        started = ray.get([worker.ready.remote() for worker in actors])
        for _, host, error in started:
            if error is not None:
                raise EvaluationError(f"a Ray worker on {host} could not start: {error}")
        self.nodes = [node for node, _, _ in started]
        self._alive = set(range(workers))
        for _ in range(per_worker):
            for number, worker in enumerate(actors):
                self._slots.put((number, worker))

    def __exit__(self, *_: object) -> None:
        from mmrag.indexes.ray_cluster import disconnect

        disconnect()

    def __call__(self, item: T) -> dict[str, Any]:
        while True:
            number, worker = self._take()
            try:
                record = self._ray.get(worker.answer.remote(item))
            except self._ray.exceptions.RayActorError:
                self._lose(number)  # its slots are not given back; the item goes elsewhere
                continue
            self._slots.put((number, worker))
            return record

    def _take(self) -> tuple[int, Any]:
        """A free slot of a live worker; slots of lost workers are dropped as they come up."""
        while True:
            with self._lock:
                if not self._alive:
                    raise EvaluationError(
                        f"all {len(self.nodes)} Ray workers were lost; the answers so far are "
                        "saved: rerun with --resume"
                    )
            try:
                number, worker = self._slots.get(timeout=1.0)
            except queue.Empty:
                continue
            if number in self._alive:
                return number, worker

    def _lose(self, number: int) -> None:
        with self._lock:
            self._alive.discard(number)

    def describe(self) -> str:
        gone = len(self.nodes) - len(self._alive)
        lost = f", {gone} lost during the run" if gone else ""
        return (
            f"Ray cluster ({self.shape}): {len(self.nodes)} workers on "
            f"{len(set(self.nodes))} of its nodes{lost}, {self.in_flight} questions in flight"
        )


def check_cluster_options(args: Any) -> None:
    """Ray options without `--executor ray` would be silently ignored: say so instead."""
    if args.executor != "ray":
        given = [
            flag
            for flag, value in (
                ("--ray-address", args.ray_address),
                ("--ray-workers", args.ray_workers),
            )
            if value is not None
        ]
        if given:
            raise EvaluationError(f"{' and '.join(given)} need --executor ray")


def add_cluster_options(parser: Any) -> None:
    group = parser.add_argument_group("scaling out (Ray)")
    group.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="where questions are answered: this process, or pipelines on a Ray cluster, one "
        "per worker (pip install 'mmrag[ray]'); the submission is the same",
    )
    group.add_argument(
        "--ray-address",
        help="HOST:PORT of a running cluster's head (`ray start --head`); default: a Ray "
        "instance on this machine. Every node must see the index and models at the same path",
    )
    group.add_argument(
        "--ray-workers",
        type=int,
        help="pipelines on the cluster (default: one per CPU, or per GPU with --device cuda); "
        "at least one question per worker is in flight whatever --concurrency says",
    )
