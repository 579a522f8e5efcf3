"""Continuous-batching LLM serving: a discrete-event simulation of requests on replicas.

Requests (sorted by arrival) are routed to ``n_rep`` replicas: join-shortest-queue
(fewest waiting plus running requests, lowest index on ties), round robin in
arrival order, or one central FIFO from which any replica pulls. A replica runs
engine steps back to back while it has work. Each step first admits waiting
requests in FIFO order (no skipping) while it runs fewer than ``max_batch``
sequences and its KV cache (``kv`` tokens) has room for the request's prompt plus
output tokens (or its ``max_new_tokens``, ``resv``) beside those its running
sequences reserved (so a batch never outgrows the cache and nothing is preempted:
an engine that reserves each request's whole context, as TGI's token budget does;
vLLM admits more and preempts; ``paged`` does as vLLM does instead,
:mod:`.serving_paged`). A request whose prompt and output (or ``resv``) exceed
``kv`` is refused at arrival: no replica (-1) and no times (NaN).

* not chunked: a step is either a prefill step, for requests admitted while their
  prompts fit in ``budget`` tokens together, or (when none can be admitted) a
  decode step of one token for every running sequence; prefill goes first.
* chunked: every step decodes one token for each sequence past its prefill and
  spends the rest of ``budget`` on prompt chunks, the unfinished prompt first.

A request's first token comes at the end of the step that completes its prompt,
each later token at the end of a decode step. Decoding sequences sit in a heap
keyed by the replica's decode-step count at which they finish, and the summed
context is kept from counts, so a step costs O(1) plus O(log max_batch) per
admission and finish. At one instant, step ends are handled before arrivals,
and replicas start their next step after both, lowest replica first among
simultaneous step ends; with the central queue, replicas idle before the instant
admit first (an idle replica takes a request arriving just as another's step
ends). Step time is ``overhead`` plus the prefill table at the step's prompt
tokens (when any) plus the decode table at (batch, summed context) (when any);
tables are linear interpolants on uniform grids (``x0``, ``h``). Loops index with
``range(n)`` from 0.

A replica that can admit nothing and has no prompt in progress runs its decode-only steps without an event each,
summing long runs of them in closed form (:func:`.serving_decode.decode_run`). With fewer than
``LAZY_REPLICAS`` replicas, or its next finish fewer than ``LAZY_STEPS`` steps away, it runs them ahead up to the
next arrival (:func:`.serving_decode.decode_ahead`). Otherwise it is lazy: its one event is its next finish, and
its steps are run when that comes or when a request it can take reaches it (up to the step then in progress; its
old event goes stale). With a queue per replica (join-shortest-queue, round robin) that is a request routed to it:
routing reads only queue lengths and running counts, which change only at those events, so an arrival costs the
work of the replica it reaches, not of every busy one. With the central queue it is a request that the idle
replicas leave waiting at its arrival: of the lazy replicas with room, those whose step ends may come before the
waiting requests are taken are run to the instant and woken (:func:`.serving_wake.wake_earliest`, which says why
that is exact), most often one. With fewer than :data:`CENTRAL_LAZY_REPLICAS` replicas, a lazy one is among those
often, so there replicas go lazy only while one is idle and requests were left waiting at under half of the recent
instants that had some (:data:`CENTRAL_WAITS`).

With a KV-cache limit a replica with room in its batch may still have none for the first waiting request: with one
central queue ``wake_earliest`` counts only the replicas whose cache has room for the longest request (``big``), and
a replica goes lazy only with nothing waiting or a full batch (the first waiting request changes as other replicas
take them). With a queue per replica only it takes from its queue, so it may go lazy with no KV room for its first
waiting request: that changes only at its own finishes, its events.

A paged cache (:mod:`.serving_paged`) may preempt a request as a step starts; running ahead, a replica stops
before a step its cache may not hold, and lazily at that step or its next finish; with one central queue, as that
module's docstring says.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .serving_decode import (
    BUSY,
    DEC,
    DSTEP,
    DTOK,
    GEN,
    HN,
    KV,
    LAZY,
    LAZY_STEPS,
    LJ,
    LOW,
    NCOL,
    PN,
    PRE,
    PTOK,
    QH,
    QL,
    QT,
    RUN,
    STEPS,
    TOUCH,
    admits,
    commit_run,
    decode_ahead,
    drop_stale,
    end_decode_step,
    end_prompts,
    go_lazy,
    interp,
    lazy_finish,
    step_context,
)
from .serving_heap import heap_pop, heap_push
from .serving_paged import horizon, mark_fits, preempt
from .serving_wake import CENTRAL_LAZY_REPLICAS, CENTRAL_WAITS, wake_earliest

JSQ, ROUND_ROBIN, CENTRAL = 0, 1, 2
UNLIMITED_KV = 1 << 62
"""A ``kv`` of this many tokens is no limit (what :func:`aonkit.model.serving.prepare` passes for none)."""
LAZY_REPLICAS = 3
"""Replicas from which lazy replicas pay (with fewer, an arrival interrupts few busy replicas, and a finish as an
event costs more than one run ahead: measured in session 44)."""


@njit
def simulate(arr, pr, out, n_rep, max_batch, budget, kv, resv, paged, chunked, routing, overhead, pf_tab, pf_x0,
             pf_h, dc_tab, dc_x0, dc_h, ahead=True, cs=1.0, dq=1, ku=1, kg=1):
    """Per request (start, first token, finish, replica), per replica (steps, busy s, tokens), preemptions.

    The tokens per replica are prefill and decode tokens, two arrays; then the preemptions per replica, and last
    per request.

    ``ahead``: run a replica's decode-only steps without an event each, ahead up to the next arrival or lazily (the
    module's docstring); False runs every step as an event, the reference the tests compare with. The counts are
    the same either way, the times up to rounding. ``resv``: when not 0, every request is sent with at most
    ``resv`` new tokens (each ``out`` is at most that): one whose prompt plus ``resv`` exceeds ``kv`` is refused,
    and the reserving cache holds its prompt plus ``resv`` tokens (as an engine that does not know the output
    length reserves its ``max_new_tokens``); 0 reserves each request's own output length. ``paged``: the KV cache
    is allocated as contexts grow, with preemption (:mod:`.serving_paged`); replicas then run ahead and lazily up
    to a finish or a full cache, and with one central queue as the module's docstring says.

    Speculative decoding (:func:`aonkit.model.serving.prepare`): ``out`` counts a request's first token and then
    its decode steps (iterations), each of which adds ``cs`` tokens to a sequence's context on average (the decode
    table's context) and puts ``dq`` tokens a sequence through the step (what a chunked step's ``budget`` leaves
    prompts: ``budget - dq * b``); a paged cache counts ``ku`` units a token and grows by ``kg`` (about ``cs * ku``)
    a sequence a step (:mod:`.serving_paged`). Plain decoding: ``cs = 1``, ``dq = 1``, ``ku = kg = 1``.
    """
    n = arr.shape[0]
    start = np.full(n, np.nan)
    first = np.full(n, np.nan)
    fin = np.full(n, np.nan)
    rep = np.full(n, -1, np.int64)
    nxt = np.full(n, -1, np.int64)
    rem = pr.copy()
    # tokens a request's next prefill computes (its prompt, plus what it generated if preempted) and has still to
    # produce: they change only with preemptions (paged)
    ctx0 = pr.copy()
    togo = out.copy()
    adm = np.empty(n if paged else 0, np.int64)  # admission stamps: the latest admitted is preempted first
    npre = np.zeros(n, np.int64)  # preemptions per request
    stamp = 0
    # with one central queue a preempted request joins it between arrivals: a paged replica runs ahead only up to
    # the earliest instant another may preempt (serving_paged.horizon), and lazy replicas are all woken at an
    # instant at which one may preempt
    pc = paged and routing == CENTRAL
    hp = np.zeros(n_rep)  # pc: the earliest instant each replica may preempt (serving_paged.horizon)
    hmin = 0.0  # pc: at most the least of every replica's hp: the loop of horizon skipped above
    dmin = max(0.0, (overhead + min(pf_tab.min(), dc_tab[1:].min())) * (1.0 - 1e-9)) if pc else 0.0
    hold = 0 if paged else resv  # tokens reserved for a request's output (0: its own output length)
    kvu = kv * ku if paged else kv  # the cache in units (paged: ku a token)
    si = np.zeros((n_rep + 1, NCOL), np.int64)
    ends = np.empty(n_rep)  # scratch for wake_earliest
    cell = np.zeros((n_rep, 5))  # a lazy replica's cell of decode steps, kept by wake_earliest (si's CN: 0, none)
    si[:, QH] = -1
    busy_s = np.zeros(n_rep)
    hk = np.empty((n_rep, max_batch), np.int64)
    hv = np.empty((n_rep, max_batch), np.int64)
    pbuf = np.empty((n_rep, max_batch), np.int64)
    ptk = np.empty((n_rep, max_batch), np.int64)
    lazy = ahead and n_rep >= LAZY_REPLICAS
    lend = np.empty(n_rep)  # a lazy replica's step in progress: its end
    lbusy = np.empty(n_rep)  # and its steps' summed durations up to its next finish
    # live events (one per replica) and lazy replicas' stale ones: one at most per arrival (JSQ, round robin), or
    # dropped when there is no room for an instant's events (central queue: a wake may leave one per replica), so
    # from 8 stale events on: the heap stays shallow (a third of a busy simulation went to popping it; dropping from
    # 16 plus two per replica on took 5% longer with 16 replicas, 0-15% with 64)
    cap = 3 * n_rep + 8 + (n if lazy and routing != CENTRAL else 0)
    ek = np.empty((1, cap))
    ev = np.empty((1, cap), np.int64)
    cand = np.empty(2 * n_rep, np.int64)  # (paged: a replica may be a candidate twice at an instant, see below)
    idle = np.empty(n_rep, np.int64)
    # what the longest request a replica can take needs (prompt plus output tokens; paged: the longest context it
    # may compute, that of a recompute, and a slot, serving_paged.longest): room for it is room for any
    fits = np.empty(n, np.bool_)  # the requests a replica's cache can hold to their end (the others are refused)
    big = mark_fits(fits, pr, out, kv, resv, paged, kvu, ku, kg, routing == CENTRAL and kv < UNLIMITED_KV)
    en = 0
    n_busy = 0
    i = 0
    rr = 0
    while True:
        t = min(arr[i] if i < n else np.inf, ek[0, 0] if en > 0 else np.inf)
        if t == np.inf:
            break
        nc = 0
        while en > 0 and ek[0, 0] <= t:  # steps ending now
            val = ev[0, 0]
            heap_pop(ek, ev, np.int64(0), en)
            en -= 1
            r = val >> 32
            if val & LOW != si[r, GEN]:  # a lazy replica's event, replaced when a request reached it
                continue
            lazy_end = si[r, LAZY] == 1
            if lazy_end:  # a lazy replica's next finish: its steps up to it run, the step ending now counted
                f = lazy_finish(si, r, n_rep if routing == CENTRAL else r, t, arr[i] if i < n else np.inf,
                                max_batch, kvu, paged, busy_s, lend, lbusy, hk, hv, fin, ctx0, togo, overhead,
                                dc_tab, dc_x0, dc_h, hold, cs, ku, kg)  # fmt: skip
                if f >= 0:  # lazy still, up to its next finish
                    heap_push(ek, ev, np.int64(0), en, f, (r << 32) | si[r, GEN])
                    en += 1
                    continue
            n_busy -= 1
            si[r, BUSY] = 0
            if not lazy_end:
                si[r, STEPS] += 1
                if si[r, DEC]:
                    end_decode_step(si, r, t, hk, hv, fin, ctx0, togo, hold, ku, kg)
            end_prompts(si, r, t, pbuf, ptk, rem, first, fin, hk, hv, ctx0, togo, hold, ku)
            si[r, TOUCH] = 1
            cand[nc] = r
            nc += 1
        i0 = i
        while i < n and arr[i] <= t:  # arrivals now
            if not fits[i]:  # it would never fit in a replica's KV cache: refused
                i += 1
                continue
            q = n_rep
            if routing == ROUND_ROBIN:
                q = rr
                rr = rr + 1 if rr + 1 < n_rep else 0
            elif routing == JSQ:
                q = 0
                for r in range(1, n_rep):
                    if si[r, QL] + si[r, RUN] < si[q, QL] + si[q, RUN]:
                        q = r
            rep[i] = q if q < n_rep else -1
            if si[q, QL] == 0:
                si[q, QH] = i
            else:
                nxt[si[q, QT]] = i
            si[q, QT] = i
            si[q, QL] += 1
            if q < n_rep and si[q, BUSY] == 0 and si[q, TOUCH] == 0:
                si[q, TOUCH] = 1
                cand[nc] = q
                nc += 1
            elif (q < n_rep and si[q, LAZY] and si[q, RUN] < max_batch
                  and admits(si, q, kvu, paged, ctx0, togo, si[q, QH], hold, ku, kg)):
                # it can take the request (the first waiting: this one, or one it had no room for): run it to now
                # (paged: its cache has filled since it went lazy, so it may not; waking it is safe either way)
                e = commit_run(si, q, lend[q], t, busy_s, hk, overhead, dc_tab, dc_x0, dc_h, -1, paged, cs, kg)
                si[q, LAZY] = 0
                si[n_rep, LAZY] -= 1
                si[q, GEN] += 1
                heap_push(ek, ev, np.int64(0), en, e, (q << 32) | si[q, GEN])
                en += 1
            i += 1
        # paged, one queue: a replica starting its step now may preempt (its cache has no room for its batch's next
        # tokens); then no replica goes lazy now (one before it would miss the request)
        risky = False
        if paged and lazy and routing == CENTRAL:
            for k in range(nc):
                if si[cand[k], HN] > 0 and si[cand[k], KV] + si[cand[k], HN] * kg > kvu:
                    risky = True
                    break
        if risky and si[n_rep, LAZY] > 0:  # and the request may wait for any lazy replica's step end: all woken
            if en + 2 * n_rep > ek.shape[1]:
                en = drop_stale(ek, ev, en, si)
            nc, en, n_busy = wake_earliest(si, t, n_rep + 1, nc, cand, en, ek, ev, n_busy, max_batch, kvu, big, lend,
                                           lbusy, busy_s, hk, hv, fin, ctx0, togo, cell, overhead, dc_tab, dc_x0,
                                           dc_h, ends, hold, paged, cs, ku, kg)  # fmt: skip
        if routing == CENTRAL and si[n_rep, QL] > 0:  # the replicas idle before now first, then those whose steps end
            ni = 0
            if n_busy + nc < n_rep:
                for r in range(n_rep):
                    if si[r, BUSY] == 0 and si[r, TOUCH] == 0:
                        si[r, TOUCH] = 1
                        idle[ni] = r
                        ni += 1
                        if ni == si[n_rep, QL]:  # each takes one at least: the others would find none
                            break
            left = si[n_rep, QL] > ni  # (each idle replica takes one at least) some may be left waiting
            si[n_rep, LJ] += (1024 if left else 0) - (si[n_rep, LJ] >> 3)  # how often, moving average: 8192 = always
            if left and i > i0 and si[n_rep, LAZY] > 0:  # arrivals left: wake the lazy replicas that may take them
                if en + 2 * n_rep > ek.shape[1]:  # room for this instant's events
                    en = drop_stale(ek, ev, en, si)
                nc, en, n_busy = wake_earliest(si, t, si[n_rep, QL] - ni, nc, cand, en, ek, ev, n_busy, max_batch,
                                               kvu, big, lend, lbusy, busy_s, hk, hv, fin, ctx0, togo, cell, overhead,
                                               dc_tab, dc_x0, dc_h, ends, hold, paged, cs, ku, kg)  # fmt: skip
            if ni > 0:  # the idle replicas go first
                for k in range(nc - 1, -1, -1):
                    cand[k + ni] = cand[k]
                cand[:ni] = idle[:ni]
                nc += ni
        c = 0
        while c < nc:  # start the next step of each replica that may have work
            r = cand[c]
            c += 1
            si[r, TOUCH] = 0
            q = n_rep if routing == CENTRAL else r
            if paged and si[r, HN] > 0 and (chunked or si[q, QL] == 0 or si[r, RUN] >= max_batch
                                             or not admits(si, r, kvu, paged, ctx0, togo, si[q, QH], hold, ku, kg)):
                # a decode step: kg units for each decoding sequence, the latest admitted preempted until they fit
                while si[r, KV] + si[r, HN] * kg > kvu:
                    preempt(si, r, q, hk, hv, pbuf, rem, ctx0, togo, adm, nxt, npre, ku, kg)
                    if q == n_rep and n_busy + nc - c + 1 < n_rep:  # an idle replica takes it now, as at an arrival
                        for o in range(n_rep):
                            if o != r and si[o, BUSY] == 0 and si[o, TOUCH] == 0:
                                if nc == cand.shape[0]:  # the candidates done so far make room
                                    for k in range(nc - c):
                                        cand[k] = cand[c + k]
                                    nc -= c
                                    c = 0
                                si[o, TOUCH] = 1
                                cand[nc] = o
                                nc += 1
                                break
                si[r, KV] += si[r, HN] * kg
            b = si[r, HN]
            pn = si[r, PN]
            tokens = 0
            room = budget - dq * b if chunked else budget
            for k in range(pn):  # the unfinished prompt (chunked only)
                ptk[r, k] = min(rem[pbuf[r, k]], room - tokens)
                tokens += ptk[r, k]
            while si[q, QL] > 0 and si[r, RUN] < max_batch and tokens < room:
                j = si[q, QH]
                take = min(rem[j], room - tokens) if chunked else rem[j]
                if tokens + take > room or not admits(si, r, kvu, paged, ctx0, togo, j, hold, ku, kg):
                    break
                si[q, QH] = nxt[j]
                si[q, QL] -= 1
                pbuf[r, pn] = j
                ptk[r, pn] = take
                pn += 1
                tokens += take
                si[r, KV] += (ctx0[j] + 1) * ku if paged else ctx0[j] + (togo[j] if hold == 0 else hold)
                si[r, RUN] += 1
                if paged:
                    adm[j] = stamp
                    stamp += 1
                if np.isnan(start[j]):
                    start[j] = t
                rep[j] = r
            decode = b > 0 and (chunked or tokens == 0)
            if tokens == 0 and not decode:
                continue
            dur = overhead
            if tokens > 0:
                dur += interp(pf_tab, np.int64(0), pf_x0, pf_h, tokens)
            if decode:
                dur += interp(dc_tab, b, dc_x0, dc_h, step_context(si, r, b, cs))
                si[r, DTOK] += b
            si[r, PTOK] += tokens
            si[r, PN] = pn
            si[r, DEC] = decode
            si[r, BUSY] = 1
            busy_s[r] += dur
            n_busy += 1
            end = t + dur
            if (lazy and tokens == 0 and decode and pn == 0
                    and (si[q, QL] == 0 or si[r, RUN] >= max_batch
                         or (q == r and not admits(si, r, kvu, paged, ctx0, togo, si[q, QH], hold, ku, kg)))
                    and hk[r, 0] - 1 - si[r, DSTEP] >= LAZY_STEPS
                    and (routing != CENTRAL or n_rep >= CENTRAL_LAZY_REPLICAS
                         or (n_busy < n_rep and si[n_rep, LJ] < CENTRAL_WAITS)) and not risky):
                # decode-only until its next finish unless a request reaches it: its event is that finish
                f = go_lazy(si, r, end, lend, lbusy, hk, overhead, dc_tab, dc_x0, dc_h, paged, kvu, cs, kg)
                if pc:  # it may preempt neither before its event nor before its cache may be full (as below)
                    hp[r] = max(f, end + ((kvu - si[r, KV]) // (si[r, RUN] * kg)) * dmin)
                    hmin = min(hmin, hp[r])
                heap_push(ek, ev, np.int64(0), en, f, (r << 32) | si[r, GEN])
                en += 1
                continue
            until = arr[i] if i < n else np.inf
            if ahead and end < until and tokens == 0 and decode and pn == 0 and si[q, QL] == 0:  # a step to take
                if pc and c < nc:  # and none may join the queue by a preemption before: one starts its step now
                    until = t
                elif pc and hmin < until:  # (hmin >= until: none may before the next arrival)
                    hmin = horizon(si, r, hp)
                    until = min(until, hmin)
                if end < until:
                    end = decode_ahead(si, r, end, until, busy_s, hk, hv, fin, ctx0, togo, overhead, dc_tab, dc_x0,
                                       dc_h, paged, kvu, hold, cs, ku, kg)  # fmt: skip
                    if end < 0:  # it ran out of work: idle
                        n_busy -= 1
                        continue
            if pc:  # its cache grows by at most kg units a running sequence a step, each at least dmin s long
                hp[r] = end + ((kvu - si[r, KV]) // (si[r, RUN] * kg)) * dmin
                hmin = min(hmin, hp[r])
            heap_push(ek, ev, np.int64(0), en, end, (r << 32) | si[r, GEN])
            en += 1
    return (start, first, fin, rep, si[:n_rep, STEPS].copy(), busy_s, si[:n_rep, PTOK].copy(),
            si[:n_rep, DTOK].copy(), si[:n_rep, PRE].copy(), npre)
