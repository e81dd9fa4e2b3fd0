"""Joining (or starting) a Ray cluster, and how many verifier actors of which kind a run gets there.

`--cluster local` starts Ray on this machine for the life of the process; `auto` joins the cluster `ray start`
made on this machine (or RAY_ADDRESS); any other value is a cluster's address (`HOST:PORT`, `ray://HOST:PORT`).
Nothing here is imported unless a cluster is asked for: without one, kernelcraft never imports Ray.
"""

from __future__ import annotations

import logging
import os
import socket

from kernelcraft.errors import ConfigError

ENV = "KERNELCRAFT_CLUSTER"
_state = {"started_here": False, "verifiers": 0}  # Ray started by this process; cluster verifiers open on it


class ClusterError(ConfigError):
    """A cluster that cannot serve the run (Ray missing, no cluster at the address, no GPU for a cuda run)."""


def cluster_address(flag: str | None) -> str | None:
    """The cluster a run is pointed at: the flag, else $KERNELCRAFT_CLUSTER, else none (one machine)."""
    return flag or os.environ.get(ENV) or None


def ray_module():
    try:
        import ray
    except ImportError:
        raise ClusterError("--cluster: Ray is not installed here; install kernelcraft's ray extra "
                           "(pip install 'kernelcraft[ray]')") from None
    return ray


def connect(address: str) -> None:
    """Connect this process to the cluster at `address` (`local`: start Ray here, stopped again when the last
    cluster verifier on it closes). A process already connected stays on its cluster."""
    ray = ray_module()
    if ray.is_initialized():
        return
    options = {"log_to_driver": False, "logging_level": logging.WARNING}
    if address != "local":
        _reachable(address)
    try:
        if address == "local":
            ray.init(include_dashboard=False, **options)
            _state["started_here"] = True
            return
        import kernelcraft

        # The driver's kernelcraft travels to every node, so each actor judges with the same code (the nodes need
        # its dependencies: torch and the backends' packages).
        ray.init(address=address, runtime_env={"py_modules": [kernelcraft], "excludes": ["__pycache__"]}, **options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = " (start one with `ray start --head`, or use --cluster local)" if address == "auto" else ""
        raise ClusterError(f"--cluster {address}: cannot join the cluster: {first}{hint}") from None


def _reachable(address: str, timeout: float = 10.0) -> None:
    """Ray retries an address where nothing answers for many minutes: a cluster's HOST:PORT that takes no TCP
    connection is said at once instead (`auto` is Ray's to find: it says at once when there is none)."""
    if address == "auto":
        return
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"--cluster {address}: not local, auto or a cluster's HOST:PORT (e.g. 10.0.0.5:6379)")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ClusterError(f"--cluster {address}: nothing answers at {host}:{port} ({exc.strerror or exc}); is "
                           "`ray start --head` running there?") from None


def hold() -> None:
    """A cluster verifier opens on the connection."""
    _state["verifiers"] += 1


def release() -> None:
    """A cluster verifier closed; the last one stops the Ray this process started (a joined cluster stays up)."""
    _state["verifiers"] = max(0, _state["verifiers"] - 1)
    if _state["verifiers"] == 0 and _state["started_here"]:
        disconnect()


def disconnect() -> None:
    """Leave the cluster (and stop Ray where this process started it)."""
    ray = ray_module()
    if ray.is_initialized():
        ray.shutdown()
    _state["started_here"] = False


def plan(address: str, device: str, actors: int | None) -> tuple[str, int]:
    """(kind, count): `cuda` with one actor per GPU of the cluster (at most `actors`), or `cpu` with `actors`
    actors (default one per node). A cuda run on a cluster without a GPU is an error, said in one line."""
    ray = ray_module()
    if device not in ("auto", "cuda", "cpu"):
        raise ClusterError(f"--device {device}: on a cluster the device is cuda (every GPU of the cluster), cpu or "
                           "auto; --actors N caps how many are used")
    if actors is not None and actors < 1:
        raise ClusterError(f"--actors {actors}: at least one verifier actor")
    resources = ray.cluster_resources()
    gpus, cpus = int(resources.get("GPU", 0)), int(resources.get("CPU", 0))
    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    kind = "cuda" if device == "cuda" or (device == "auto" and gpus) else "cpu"
    if kind == "cuda":
        if not gpus:
            raise ClusterError(f"--cluster {address}: the cluster has no GPU for a --device cuda run ({nodes} "
                               f"node(s), {cpus} CPUs); use --device cpu, or add a node with a GPU")
        return kind, min(actors or gpus, gpus)
    count = actors or nodes
    if count > cpus:
        raise ClusterError(f"--actors {count}: the cluster has {cpus} CPUs, one per CPU verifier actor")
    return kind, count
