"""One central queue in the serving simulation (:mod:`.serving`): which lazy replicas to wake for waiting requests.

A lazy replica (:func:`.serving_decode.go_lazy`) runs decode-only steps with no event each; with one central queue
it must still take a waiting request at its first step end, as any replica with room does. Waking every lazy
replica whenever requests are left waiting costs an event for each, at nearly every arrival once no replica is
idle; :func:`wake_earliest` wakes only the ones whose step ends can come first.

Why that is exact: a replica with room that is decode-only at a step end takes at least one waiting request
there (with chunked prefill the token budget is at least ``max_batch``, so the batch leaves it room; without,
no prompt exceeds the budget: :func:`aonkit.model.serving.prepare` checks both). Say ``k`` requests are left
waiting at an arrival instant, and the step ends in progress of the lazy replicas with room and of the replicas
already woken for earlier requests (still before their woken step end) are ``e_1 <= e_2 <= ...``. Waking every
lazy one with ``e <= e_k`` gives at least ``k`` step ends, each taking one, by ``e_k``, so the ``k`` requests are
gone by then; a replica left lazy has every step end after ``e_k``, and would have found none of them. Between
arrivals the queue only shrinks; a replica goes lazy only with a full batch or nothing waiting, and a lazy one
that finishes while requests wait takes them (:func:`.serving_decode.lazy_finish`). So the event loop calls it at
arrival instants only. Loops index with ``range(n)`` from 0.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit_leaf
from .serving_decode import (
    BUSY,
    DSTEP,
    GEN,
    LAZY,
    LJ,
    RUN,
    STEPS,
    TOUCH,
    WOKE,
    commit_run,
    end_decode_step,
    heap_push,
)

FEW = 4
"""Up to this many requests left waiting, the ``k``-th earliest step end is found by ``k`` passes over the replicas
(no allocation, no sort); with more, every lazy replica with room is woken."""


@njit_leaf
def advance_lazy(si, r, t, lend, lbusy, busy_s, hk, overhead, dc_tab, dc_x0, dc_h):
    """Run lazy replica ``r``'s steps up to the one in progress at ``t``, which it stays lazy in; return its end.

    Its finish (its event) is unchanged: the steps and busy time :func:`.serving_decode.go_lazy` kept for it
    (``LJ``, ``lbusy``) lose the ones run here, which :func:`.serving_decode.lazy_finish` then adds.
    """
    end = lend[r]
    if end >= t:
        return end
    d, before = si[r, DSTEP], busy_s[r]
    busy_s[r] = 0.0  # (so that commit_run leaves there the busy time of these steps alone)
    end = commit_run(si, r, end, t, busy_s, hk, overhead, dc_tab, dc_x0, dc_h)
    busy = busy_s[r]
    busy_s[r] = before + busy
    si[r, LJ] -= si[r, DSTEP] - d
    lbusy[r] -= busy
    lend[r] = end
    return end


@njit_leaf
def kth_end(ends, n, k):
    """The ``k``-th smallest of ``ends[:n]``, equal values counted each (``k <= n``), by ``k`` passes at most."""
    cut = -np.inf
    got = 0
    while got < k:
        m = np.inf
        mult = 0
        for j in range(n):
            x = ends[j]
            if x > cut:
                if x < m:
                    m = x
                    mult = 1
                elif x == m:
                    mult += 1
        cut = m
        got += mult
    return cut


@njit_leaf
def wake_earliest(si, t, need, nc, cand, en, ek, ev, n_busy, max_batch, lend, lbusy, busy_s, hk, hv, fin, pr, out,
                  overhead, dc_tab, dc_x0, dc_h, ends):
    """``need`` requests are left waiting at arrival instant ``t``: wake the lazy replicas that may take them.

    Every lazy replica with room runs to its step in progress at ``t`` (:func:`advance_lazy`). With the ends of
    those steps and of the replicas woken earlier whose woken step has not ended (``WOKE``, their end in
    ``lend``), the lazy ones ending at or before the ``need``-th earliest are woken (all of them when ``need`` is
    over :data:`FEW`): their old events go stale and their step end becomes their event. One whose step ends at
    ``t`` itself ends it now and joins the replicas whose steps end now (``cand[:nc]``, kept in replica order), as
    the event loop would have handled it before the instant's arrivals. ``ends`` is scratch space of one float per
    replica. Returns the new ``nc``, ``en`` and ``n_busy``.
    """
    n_rep = si.shape[0] - 1
    nb = 0
    for r in range(n_rep):
        if si[r, LAZY] == 1:
            si[r, WOKE] = 0
            if si[r, RUN] < max_batch:
                ends[nb] = advance_lazy(si, r, t, lend, lbusy, busy_s, hk, overhead, dc_tab, dc_x0, dc_h)
                nb += 1
        elif si[r, WOKE] == 1:
            if lend[r] > t:
                ends[nb] = lend[r]
                nb += 1
            else:  # its woken step ended: it took a request then, or found none left
                si[r, WOKE] = 0
    cut = kth_end(ends, nb, need) if need <= FEW and need < nb else np.inf
    for r in range(n_rep):
        if si[r, LAZY] == 0 or si[r, RUN] >= max_batch or lend[r] > cut:
            continue
        si[r, LAZY] = 0
        si[-1, LAZY] -= 1
        si[r, GEN] += 1
        e = lend[r]
        if e > t:
            si[r, WOKE] = 1
            heap_push(ek, ev, np.int64(0), en, e, (r << 32) | si[r, GEN])
            en += 1
            continue
        si[r, STEPS] += 1
        end_decode_step(si, r, t, hk, hv, fin, pr, out)
        si[r, BUSY] = 0
        n_busy -= 1
        si[r, TOUCH] = 1
        k = nc
        while k > 0 and cand[k - 1] > r:
            cand[k] = cand[k - 1]
            k -= 1
        cand[k] = r
        nc += 1
    return nc, en, n_busy
