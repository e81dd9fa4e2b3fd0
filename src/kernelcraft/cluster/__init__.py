"""Runs and benches over a Ray cluster: one verifier actor per device; this process (the driver) keeps the
store, the proposer, the budgets and the strategy. Importing this package imports Ray only when asked to connect."""

from kernelcraft.cluster.connect import ENV, ClusterError, cluster_address, connect, disconnect, plan

__all__ = ["ENV", "ClusterError", "ClusterVerifier", "cluster_address", "connect", "disconnect", "plan"]


def __getattr__(name):
    if name == "ClusterVerifier":
        from kernelcraft.cluster.pool import ClusterVerifier

        return ClusterVerifier
    raise AttributeError(name)
