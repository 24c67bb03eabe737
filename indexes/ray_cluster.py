"""Joining a Ray cluster, for index builds and eval runs alike.

Ray is an optional extra (`mmrag[ray]`) and is imported only here, when a command asks for it.
Two of `ray.init`'s defaults do not suit a command-line tool: an unreachable head is retried for
minutes, and without an address it joins whatever cluster `ray start` last left running on the
machine (or $RAY_ADDRESS), so a "local" run could land on a colleague's cluster. `connect`
refuses the first in one line and asks for a fresh local instance in the second case.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from typing import Any

from mmrag.indexes.errors import InputError

CONNECT_TIMEOUT_S = 5.0
AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


def require_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError("--executor ray needs Ray: pip install 'mmrag[ray]' (ray[data])") from None
    return ray


def check_reachable(address: str) -> None:
    """ray.init retries an unreachable head for minutes; a user deserves one line at once."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"--ray-address {address!r}: expected HOST:PORT of the head node")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise InputError(
            f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}"
        ) from None


@dataclass(frozen=True)
class ClusterShape:
    """What the cluster offered when this process joined it."""

    nodes: int
    cpus: int
    gpus: int

    def __str__(self) -> str:
        return f"{self.nodes} node{'s' * (self.nodes != 1)}, {self.cpus} CPUs, {self.gpus} GPUs"


def connect(address: str | None) -> ClusterShape:
    """Join the cluster at `address`, or start a Ray instance of our own without one."""
    ray = require_ray()
    if address:
        check_reachable(address)
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    else:
        # Starting an instance of our own, Ray warns on stderr whether token authentication
        # is on or off; the instance lives and dies with this command, so the line is noise.
        logging.getLogger(AUTH_LOGGER).setLevel(logging.ERROR)
        ray.init(
            address="local",
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    resources = ray.cluster_resources()
    return ClusterShape(
        nodes=sum(1 for node in ray.nodes() if node.get("Alive")),
        cpus=int(resources.get("CPU", 0)),
        gpus=int(resources.get("GPU", 0)),
    )


def disconnect() -> None:
    require_ray().shutdown()
