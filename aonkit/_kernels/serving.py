"""Continuous-batching LLM serving: a discrete-event simulation of requests on replicas.

Requests (sorted by arrival) are routed to ``n_rep`` replicas: join-shortest-queue
(fewest waiting plus running requests, lowest index on ties), round robin in
arrival order, or one central FIFO from which any replica pulls. A replica runs
engine steps back to back while it has work. Each step first admits waiting
requests in FIFO order (no skipping) while it runs fewer than ``max_batch``
sequences:

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
simultaneous step ends. Step time is ``overhead`` plus
the prefill table at the step's prompt tokens (when any) plus the decode table
at (batch, summed context) (when any); tables are linear interpolants on uniform
grids (``x0``, ``h``). Loops index with ``range(n)`` from 0.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit, njit_leaf

JSQ, ROUND_ROBIN, CENTRAL = 0, 1, 2

# columns of the int64 state per replica; row n_rep holds the central queue's head, tail and length
QH, QT, QL, RUN, HN, DSTEP, SP, SJ, PN, BUSY, DEC, TOUCH, STEPS, PTOK, DTOK = range(15)
NCOL = 15


@njit_leaf
def heap_push(hk, hv, r, n, key, val):
    """Push (key, val) onto the min-heap of ``n`` items in row ``r`` of ``hk``/``hv`` (ordered by key, then val).

    Equal keys pop in ``val`` order, whatever the heap's history: simultaneous step ends are handled lowest
    replica first.
    """
    j = n
    while j > 0:
        p = (j - 1) >> 1
        if hk[r, p] < key or (hk[r, p] == key and hv[r, p] < val):
            break
        hk[r, j] = hk[r, p]
        hv[r, j] = hv[r, p]
        j = p
    hk[r, j] = key
    hv[r, j] = val


@njit_leaf
def heap_pop(hk, hv, r, n):
    """Drop the root of the min-heap of ``n`` items in row ``r`` (read it first)."""
    n -= 1
    key = hk[r, n]
    val = hv[r, n]
    j = 0
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and (hk[r, c + 1] < hk[r, c] or (hk[r, c + 1] == hk[r, c] and hv[r, c + 1] < hv[r, c])):
            c += 1
        if hk[r, c] > key or (hk[r, c] == key and hv[r, c] > val):
            break
        hk[r, j] = hk[r, c]
        hv[r, j] = hv[r, c]
        j = c
    hk[r, j] = key
    hv[r, j] = val


@njit_leaf
def interp(tab, row, x0, h, x):
    """Row ``row`` of ``tab`` (values at ``x0 + k*h``) interpolated linearly at ``x``."""
    u = (x - x0) / h
    m = tab.shape[1] - 1
    k = min(max(int(u), 0), m - 1)
    return tab[row, k] + (u - k) * (tab[row, k + 1] - tab[row, k])


@njit_leaf
def end_decode_step(si, r, t, hk, hv, fin, pr, out):
    """End replica ``r``'s decode step at ``t``: its decode-step count advances, the sequences it completed finish."""
    d = si[r, DSTEP] + 1
    si[r, DSTEP] = d
    while si[r, HN] > 0 and hk[r, 0] <= d:
        j = hv[r, 0]
        heap_pop(hk, hv, r, si[r, HN])
        si[r, HN] -= 1
        fin[j] = t
        si[r, RUN] -= 1
        si[r, SP] -= pr[j]
        si[r, SJ] -= d - out[j] + 1


@njit
def simulate(arr, pr, out, n_rep, max_batch, budget, chunked, routing, overhead, pf_tab, pf_x0, pf_h, dc_tab,
             dc_x0, dc_h, ahead=True):
    """Per request (start, first token, finish, replica); per replica (steps, busy s, prefill and decode tokens).

    ``ahead``: run a replica's decode-only steps ahead (:func:`decode_ahead`) while nothing can reach it; the
    results are the same to the last bit either way (the tests compare).
    """
    n = arr.shape[0]
    start = np.full(n, np.nan)
    first = np.full(n, np.nan)
    fin = np.full(n, np.nan)
    rep = np.full(n, -1, np.int64)
    nxt = np.full(n, -1, np.int64)
    rem = pr.copy()
    si = np.zeros((n_rep + 1, NCOL), np.int64)
    si[:, QH] = -1
    busy_s = np.zeros(n_rep)
    hk = np.empty((n_rep, max_batch), np.int64)
    hv = np.empty((n_rep, max_batch), np.int64)
    pbuf = np.empty((n_rep, max_batch), np.int64)
    ptk = np.empty((n_rep, max_batch), np.int64)
    ek = np.empty((1, n_rep))
    ev = np.empty((1, n_rep), np.int64)
    cand = np.empty(n_rep, np.int64)
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
            r = ev[0, 0]
            heap_pop(ek, ev, np.int64(0), en)
            en -= 1
            n_busy -= 1
            si[r, BUSY] = 0
            si[r, STEPS] += 1
            if si[r, DEC]:
                end_decode_step(si, r, t, hk, hv, fin, pr, out)
            keep = 0
            for k in range(si[r, PN]):
                j = pbuf[r, k]
                rem[j] -= ptk[r, k]
                if rem[j] > 0:
                    pbuf[r, keep] = j
                    keep += 1
                    continue
                first[j] = t
                if out[j] == 1:
                    fin[j] = t
                    si[r, RUN] -= 1
                else:
                    heap_push(hk, hv, r, si[r, HN], si[r, DSTEP] + out[j] - 1, j)
                    si[r, HN] += 1
                    si[r, SP] += pr[j]
                    si[r, SJ] += si[r, DSTEP]
            si[r, PN] = keep
            si[r, TOUCH] = 1
            cand[nc] = r
            nc += 1
        while i < n and arr[i] <= t:  # arrivals now
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
            i += 1
        if routing == CENTRAL and si[n_rep, QL] > 0 and n_busy + nc < n_rep:
            for r in range(n_rep):
                if si[r, BUSY] == 0 and si[r, TOUCH] == 0:
                    si[r, TOUCH] = 1
                    cand[nc] = r
                    nc += 1
        for c in range(nc):  # start the next step of each replica that may have work
            r = cand[c]
            si[r, TOUCH] = 0
            q = n_rep if routing == CENTRAL else r
            b = si[r, HN]
            pn = si[r, PN]
            tokens = 0
            room = budget - b if chunked else budget
            for k in range(pn):  # the unfinished prompt (chunked only)
                ptk[r, k] = min(rem[pbuf[r, k]], room - tokens)
                tokens += ptk[r, k]
            while si[q, QL] > 0 and si[r, RUN] < max_batch and tokens < room:
                j = si[q, QH]
                take = min(pr[j], room - tokens) if chunked else pr[j]
                if tokens + take > room:
                    break
                si[q, QH] = nxt[j]
                si[q, QL] -= 1
                pbuf[r, pn] = j
                ptk[r, pn] = take
                pn += 1
                tokens += take
                si[r, RUN] += 1
                start[j] = t
                rep[j] = r
            decode = b > 0 and (chunked or tokens == 0)
            if tokens == 0 and not decode:
                continue
            dur = overhead
            if tokens > 0:
                dur += interp(pf_tab, np.int64(0), pf_x0, pf_h, tokens)
            if decode:
                ctx = si[r, SP] + b * (1 + si[r, DSTEP]) - si[r, SJ]
                dur += interp(dc_tab, b, dc_x0, dc_h, ctx)
                si[r, DTOK] += b
            si[r, PTOK] += tokens
            si[r, PN] = pn
            si[r, DEC] = decode
            si[r, BUSY] = 1
            busy_s[r] += dur
            n_busy += 1
            end = t + dur
            until = arr[i] if i < n else np.inf
            if ahead and end < until and tokens == 0 and decode and pn == 0 and si[q, QL] == 0:  # a step to take
                end = decode_ahead(si, r, end, until, busy_s, hk, hv, fin, pr, out, overhead, dc_tab, dc_x0, dc_h)
                if end < 0:  # it ran out of work: idle
                    n_busy -= 1
                    continue
            heap_push(ek, ev, np.int64(0), en, end, r)
            en += 1
    return start, first, fin, rep, si[:n_rep, STEPS].copy(), busy_s, si[:n_rep, PTOK].copy(), si[:n_rep, DTOK].copy()


@njit_leaf
def decode_ahead(si, r, end, until, busy_s, hk, hv, fin, pr, out, overhead, dc_tab, dc_x0, dc_h):
    """Run replica ``r``'s decode-only steps while each ends before ``until`` (the next arrival).

    Called as a decode-only step starts (nothing waiting for ``r``, no prompt in progress): until an
    arrival nothing else can reach ``r`` (other replicas share only the arrivals, and the central queue,
    empty, only grows with them), so its steps follow one another as the event loop would run them, with
    the same arithmetic in the same order. Between two finishes the batch is the same, so those steps run
    in a loop of locals (the step count, decode-step count, tokens and busy time are written back after
    it); a step at which a sequence finishes goes through :func:`end_decode_step`. Returns the end of the
    step in progress (for the event heap) or -1 when its last sequence finished and it went idle (``BUSY``
    cleared).
    """
    while end < until:
        b = si[r, HN]
        d = si[r, DSTEP]
        last = hk[r, 0] - 1  # the last decode-step count before the next finish
        if d < last:  # steps that end with no sequence finishing
            sp, sj, steps, dtok, busy = si[r, SP], si[r, SJ], si[r, STEPS], si[r, DTOK], busy_s[r]
            while end < until and d < last:
                steps += 1  # the step ending at `end`
                d += 1
                dur = overhead + interp(dc_tab, b, dc_x0, dc_h, sp + b * (1 + d) - sj)  # the next, from `end`
                dtok += b
                busy += dur
                end = end + dur
            si[r, DSTEP], si[r, STEPS], si[r, DTOK] = d, steps, dtok
            busy_s[r] = busy
            continue
        si[r, STEPS] += 1  # the step ending at `end`: a sequence finishes
        end_decode_step(si, r, end, hk, hv, fin, pr, out)
        b = si[r, HN]
        if b == 0:
            si[r, BUSY] = 0
            return -1.0
        ctx = si[r, SP] + b * (1 + si[r, DSTEP]) - si[r, SJ]  # the next decode step, starting at `end`
        dur = overhead + interp(dc_tab, b, dc_x0, dc_h, ctx)
        si[r, DTOK] += b
        busy_s[r] += dur
        end = end + dur
    return end
