"""Projection of CPU ranges onto the GPU work launched inside them."""

from __future__ import annotations

import numpy as np

from ._jit import njit


@njit
def project_up(parent, is_range, launch_pos, gpu_ts, gpu_end):
    """Accumulate each GPU event into every range that encloses its launch.

    Parameters are local positions of a CPU stack (``parent`` from
    :func:`aonkit._kernels.nesting.parents`); ``launch_pos[g]`` is the position
    of GPU event ``g``'s launch (-1 when it has none). Returns, per position,
    the first GPU start, the last GPU end, the number of GPU events and the
    sum of their durations (``first = -1``... only meaningful where count > 0).
    """
    n = parent.shape[0]
    first = np.full(n, np.iinfo(np.int64).max, np.int64)
    last = np.full(n, np.iinfo(np.int64).min, np.int64)
    count = np.zeros(n, np.int64)
    total = np.zeros(n, np.int64)
    for g in range(launch_pos.shape[0]):
        p = launch_pos[g]
        while p >= 0:
            if is_range[p]:
                if gpu_ts[g] < first[p]:
                    first[p] = gpu_ts[g]
                if gpu_end[g] > last[p]:
                    last[p] = gpu_end[g]
                count[p] += 1
                total[p] += gpu_end[g] - gpu_ts[g]
            p = parent[p]
    return first, last, count, total
