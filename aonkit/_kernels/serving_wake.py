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
arrival instants only (and, paged, where a replica may preempt). Loops index with ``range(n)`` from 0.

With a KV-cache limit a replica with room in its batch takes a waiting request at its step end only if its cache
has room for it too. One whose cache has room for the longest request of the simulation (``big`` tokens) is sure
to (its reserved tokens only fall until its step ends: it admits only at step ends). The argument above counts
only those: the ``k``-th earliest of their step ends is the cut, by which the ``k`` requests are gone; any replica
whose steps all end later, sure or not, would find none. A woken replica's step end counts for later requests only
if it was sure. A paged cache grows as its replica steps (:func:`sure` bounds it at the lazy replica's event), and
a preempted request joins the central queue between arrivals: the event loop then wakes every lazy replica with
room (``need`` over :data:`FEW`) at the instant a replica may preempt (:mod:`.serving`).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit_leaf, njit_leaf_inline
from .serving_decode import (
    BUSY,
    CB,
    CD,
    CN,
    DSTEP,
    DTOK,
    GEN,
    HN,
    KV,
    LAZY,
    LJ,
    RUN,
    STEPS,
    TOUCH,
    WOKE,
    base_context,
    cell_steps,
    end_decode_step,
)
from .serving_heap import heap_push

CENTRAL_LAZY_REPLICAS = 16
"""With one central queue and fewer replicas, a lazy replica is among the few woken for a waiting request too often
to pay: they go lazy only as :data:`CENTRAL_WAITS` says. Measured in session 47 on the serving panel's workload:
without that rule, the panel's sweep of rates took up to 28% longer with 8 replicas, and 7-21% shorter with 16."""
CENTRAL_WAITS = 4096
"""With one central queue and fewer than :data:`CENTRAL_LAZY_REPLICAS` replicas, replicas go lazy only while one is
idle and requests are left waiting (lazy ones are then woken) at fewer than half (4096 of 8192, a moving average
kept in the queue's row) of the instants that had some: at higher loads they would wake at nearly every arrival,
which costs more than running ahead (measured in session 45)."""
FEW = 4
"""Up to this many requests left waiting, the ``k``-th earliest step end is found by ``k`` passes over the replicas
(no allocation, no sort); with more, every lazy replica with room is woken."""


@njit_leaf
def run_steps(si, r, n, a, g, lend, lbusy, busy_s, grow=False, kg=1):
    """Run lazy replica ``r``'s next ``n`` steps, lasting ``a + g*j`` (``j < n``) from ``lend[r]``; their end.

    Its finish (its event) is unchanged: the steps and busy time :func:`.serving_decode.go_lazy` kept for it
    (``LJ``, ``lbusy``) lose the ones run here, which :func:`.serving_decode.lazy_finish` then adds. ``grow``
    (paged): each step ended was followed by one started, which holds ``kg`` KV-cache units more a sequence.
    """
    s = n * a + g * (n * (n - 1) * 0.5)
    if grow:
        si[r, KV] += si[r, HN] * n * kg
    si[r, DSTEP] += n
    si[r, STEPS] += n
    si[r, DTOK] += si[r, HN] * n
    busy_s[r] += s
    si[r, LJ] -= n
    lbusy[r] -= s
    lend[r] += s
    return lend[r]


@njit_leaf_inline
def peek_end(si, r, t, lend, lbusy, busy_s, hk, cell, overhead, dc_tab, dc_x0, dc_h, grow, cs=1.0, kg=1):
    """The end of lazy replica ``r``'s step in progress at ``t``, found without running its steps to there.

    Woken or not, every lazy replica with room comes here at each arrival that leaves requests waiting, a few steps
    on from the last time once no replica is idle (16 replicas at 45 requests/s: 14 a wake, 230,000 a simulation).
    Running each there (:func:`.serving_decode.decode_run`, a call, and its state written) took about a third of
    such a simulation; instead the cell of the grid its next steps share is kept
    (:func:`.serving_decode.cell_steps`: durations ``a + g*j``; ``cell[r, :2]`` holds ``a`` and ``g``, ``CD`` and
    ``CN`` the decode-step count they start from and their number, ``CB`` and ``cell[r, 4]`` the batch and base
    context they were found for), and the step reaching ``t`` comes from their sum ``n*a + g*n(n-1)/2``, with the test
    :func:`.serving_decode.decode_run` bisects on. Only a cell that ends before ``t`` is run (:func:`run_steps`).
    Leaves in ``cell[r, 2]`` and ``cell[r, 3]`` the end found and the steps to it, for :func:`wake_earliest` to run
    if it wakes the replica; returns the end. Inlined into its caller (a call passed the structs of its eight
    arrays). ``grow``, ``kg``: as for :func:`run_steps`; ``cs``: context tokens a sequence gains a step.
    """
    end = lend[r]
    while end < t:
        d = si[r, DSTEP]
        last = hk[r, 0] - 1  # its next finish
        if d >= last:  # (its finish is its event, at t or later: the sums may fall an ulp short of it)
            break
        b = si[r, HN]
        base = base_context(si, r, b, cs)
        o = d - si[r, CD]
        if o < 0 or o >= si[r, CN] or si[r, CB] != b or cell[r, 4] != base:  # another cell, or another batch
            a, g, m = cell_steps(dc_tab, b, dc_x0, dc_h, overhead, base + b * cs * (d + 1), last - d, cs)
            cell[r, 0], cell[r, 1], cell[r, 4] = a, g, base
            si[r, CD], si[r, CN], si[r, CB] = d, m, b
            o = 0
        g = cell[r, 1]
        a = cell[r, 0] + g * o  # the next step's duration
        m = si[r, CN] - o  # steps left in the cell
        x = t - end
        n = min(m, int(x / a) + 1) if a > 0 and x < a * m else m  # first guess, then the test itself
        while n < m and end + (n * a + g * (n * (n - 1) * 0.5)) < t:
            n += 1
        while n > 1 and end + ((n - 1) * a + g * ((n - 1) * (n - 2) * 0.5)) >= t:
            n -= 1
        e = end + (n * a + g * (n * (n - 1) * 0.5))
        if e >= t:
            cell[r, 2], cell[r, 3] = e, n
            return e
        end = run_steps(si, r, n, a, g, lend, lbusy, busy_s, grow, kg)  # the whole cell ends before t
    cell[r, 2], cell[r, 3] = end, 0
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


@njit_leaf_inline
def sure(si, r, kv, big, paged, kg=1):
    """Whether replica ``r``'s KV cache (``kv`` tokens) has room for any request at its next step end.

    Reserving: the longest request reserves ``big`` tokens. Paged (``kv`` and ``big`` in units): the longest
    context a request may bring and its slot are ``big`` units; it needs them and a step's growth (``kg``) for each
    running sequence (:func:`.serving_decode.admits`), beside what the batch holds once its next step (chunked
    prefill: decoding first) has grown it by ``kg`` a sequence, and a lazy replica's cache may have grown up to its
    event (``LJ`` more steps).
    """
    if paged:
        steps = si[r, LJ] + 1 if si[r, LAZY] == 1 else 1
        return si[r, KV] + (si[r, HN] * steps + si[r, RUN]) * kg + big <= kv
    return si[r, KV] + big <= kv


@njit_leaf
def wake_earliest(si, t, need, nc, cand, en, ek, ev, n_busy, max_batch, kv, big, lend, lbusy, busy_s, hk, hv, fin,
                  pr, out, cell, overhead, dc_tab, dc_x0, dc_h, ends, resv=0, paged=False, cs=1.0, ku=1, kg=1):
    """``need`` requests are left waiting at arrival instant ``t``: wake the lazy replicas that may take them.

    Every lazy replica with room finds the end of its step in progress at ``t`` (:func:`peek_end`). With the ends of
    those steps and of the replicas woken earlier whose woken step has not ended (``WOKE``, their end in ``lend``),
    the lazy ones ending at or before the ``need``-th earliest are woken (all of them when ``need`` is over
    :data:`FEW`; with a KV-cache limit only the :func:`sure` ones' ends count): their steps to there run
    (:func:`run_steps`), their old events go stale and their step end becomes their event. One whose step ends at
    ``t`` itself ends it now and joins the replicas whose steps end now (``cand[:nc]``, kept in replica order), as
    the event loop would have handled it before the instant's arrivals.
    ``ends`` is scratch space of one float per replica; ``resv``: the KV-cache tokens reserved for any request's
    output, when not 0 (:func:`.serving_decode.end_decode_step`); ``ku``, ``kg``: a paged cache's units
    (:mod:`.serving_paged`). Returns the new ``nc``, ``en`` and ``n_busy``.
    """
    n_rep = si.shape[0] - 1
    nb = 0
    for r in range(n_rep):
        if si[r, LAZY] == 1:
            si[r, WOKE] = 0
            if si[r, RUN] < max_batch:
                e = peek_end(si, r, t, lend, lbusy, busy_s, hk, cell, overhead, dc_tab, dc_x0, dc_h, paged, cs, kg)
                if sure(si, r, kv, big, paged, kg):
                    ends[nb] = e
                    nb += 1
        elif si[r, WOKE] == 1:
            if lend[r] > t:
                if sure(si, r, kv, big, paged, kg):
                    ends[nb] = lend[r]
                    nb += 1
            else:  # its woken step ended: it took a request then, or found none left
                si[r, WOKE] = 0
    cut = kth_end(ends, nb, need) if need <= FEW and need < nb else np.inf
    for r in range(n_rep):
        if si[r, LAZY] == 0 or si[r, RUN] >= max_batch or cell[r, 2] > cut:
            continue
        e = cell[r, 2]
        n = int(cell[r, 3])
        if n > 0:  # (with none its cell may never have been found: lend[r] reached t already)
            g = cell[r, 1]
            e = run_steps(si, r, n, cell[r, 0] + g * (si[r, DSTEP] - si[r, CD]), g, lend, lbusy, busy_s, paged, kg)
        si[r, LAZY] = 0
        si[-1, LAZY] -= 1
        si[r, GEN] += 1
        if e > t:
            si[r, WOKE] = 1
            heap_push(ek, ev, np.int64(0), en, e, (r << 32) | si[r, GEN])
            en += 1
            continue
        si[r, STEPS] += 1
        end_decode_step(si, r, t, hk, hv, fin, pr, out, resv, ku, kg)
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
