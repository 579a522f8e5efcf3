"""Collective communication time from message size, group size, link bandwidth and latency.

The alpha-beta model with per-step latency ``alpha`` (s) and per-GPU
one-direction bandwidth ``B`` (bytes/s) times an efficiency ``e``, for a group
of ``n`` ranks and a message of ``M`` bytes (all-reduce, reduce-scatter: the
full buffer on each rank; all-gather: the gathered buffer; all-to-all: what
one rank sends in all; send: one point-to-point message)::

    all_reduce, ring      2*(n - 1) * alpha + 2*(n - 1)/n * M / (e*B)
    all_reduce, tree      2*ceil(log2 n) * alpha + 2 * M / (e*B)     (pipelined double binary tree)
    all_gather            (n - 1) * alpha + (n - 1)/n * M / (e*B)
    reduce_scatter        (n - 1) * alpha + (n - 1)/n * M / (e*B)
    all_to_all            (n - 1) * alpha + (n - 1)/n * M / (e*B)
    send                  alpha + M / (e*B)

A group whose ranks all sit in one node uses the intra-node link (NVLink),
any other the inter-node one (each GPU's own NIC): rings and trees across
nodes are paced by the NIC. Hierarchical (two-level) algorithms are not
modelled.

The preset figures are nominal datasheet numbers and assumed latencies, not
measurements: calibrate them (or the link efficiencies of
:data:`~aonkit.model.llm.step.EFFICIENCY`) against nccl-tests on your system.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send")


@dataclass(frozen=True)
class Link:
    """One kind of link: per-GPU bandwidth in one direction (bytes/s) and latency per algorithm step (s)."""

    bandwidth: float
    latency: float = 0.0

    def __post_init__(self) -> None:
        if not self.bandwidth > 0 or self.latency < 0:
            raise ValueError(f"Link: bandwidth must be > 0 and latency >= 0, got {self.bandwidth}, {self.latency}")


@dataclass(frozen=True)
class Network:
    """Intra-node and inter-node links of a cluster of ``gpus_per_node``-GPU nodes."""

    intra: Link
    inter: Link
    gpus_per_node: int = 8
    name: str = ""
    sources: str = ""

    def link(self, size: int, stride: int = 1) -> tuple[Link, str]:
        """The link a group of ``size`` ranks ``stride`` apart uses, and ``"intra"`` or ``"inter"``."""
        if size * stride <= self.gpus_per_node:
            return self.intra, "intra"
        return self.inter, "inter"


def collective_time(kind: str, nbytes: float, n: int, link: Link, algorithm: str = "ring",
                    efficiency: float = 1.0) -> float:  # fmt: skip
    """Seconds for one collective (see the module doc); 0 for a group of one.

    Parameters
    ----------
    kind : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send"}
    nbytes : float
        Message size ``M``.
    n : int
        Ranks in the group.
    link : Link
    algorithm : {"ring", "tree"}
        Tree applies to all-reduce only.
    efficiency : float
        Fraction of the link bandwidth attained (bus bandwidth / nominal).
    """
    if kind not in COLLECTIVES:
        raise ValueError(f"unknown collective {kind!r}; known: {COLLECTIVES}")
    if algorithm not in ("ring", "tree"):
        raise ValueError(f"algorithm must be 'ring' or 'tree', not {algorithm!r}")
    if n <= 1:
        return 0.0
    bw = link.bandwidth * efficiency
    if kind == "send":
        return link.latency + nbytes / bw
    if kind == "all_reduce":
        if algorithm == "tree":
            return 2 * math.ceil(math.log2(n)) * link.latency + 2 * nbytes / bw
        return 2 * (n - 1) * link.latency + 2 * (n - 1) / n * nbytes / bw
    return (n - 1) * link.latency + (n - 1) / n * nbytes / bw


_DGX_A100 = ("NVIDIA DGX A100 datasheet: NVLink 600 GB/s per GPU (both directions), 8x 200 Gb/s HDR InfiniBand "
             "compute NICs (one per GPU); latencies 5 us NVLink, 10 us IB assumed")  # fmt: skip
_DGX_H100 = ("NVIDIA DGX H100 datasheet: NVLink 900 GB/s per GPU (both directions), 8x 400 Gb/s NDR "
             "ConnectX-7 compute NICs (one per GPU); latencies 5 us NVLink, 10 us IB assumed")  # fmt: skip

DGX_A100 = Network(Link(300e9, 5e-6), Link(25e9, 10e-6), 8, "DGX A100 (HDR IB)", _DGX_A100)
"""8 A100 per node: NVLink 300 GB/s per direction, one 200 Gb/s (25 GB/s) NIC per GPU (Selene, Narayanan et al.)."""
DGX_H100 = Network(Link(450e9, 5e-6), Link(50e9, 10e-6), 8, "DGX H100 (NDR IB)", _DGX_H100)
"""8 H100 per node: NVLink 450 GB/s per direction, one 400 Gb/s (50 GB/s) NIC per GPU."""
