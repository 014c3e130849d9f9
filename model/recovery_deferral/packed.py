"""The recovery-deferral model packed for the explorer (issue 36; the machinery:
model/engines/action_view.py and model/engines/packing.py).

The state is model.py's nested tuple (``fed, queues, running, status, pending, entries, slot, rec,
notes, sched, backlog, told, upctx``); :func:`layout` gives each field its domain from the
configuration alone (a queue and a match's backlog are tuples of event ids: every sequence of the
events they can hold), as tight as the model's design allows, so that the reference packs into one
machine word.  They are hints, not claims: a state outside them raises PackingError and the
explorer searches the states as tuples (the tests check that no manifest configuration does).  The successors are the model's own ``step`` per action of :func:`universe`,
the order ``actions`` lists them in: the feed thread's (``feed`` per producer, or ``track``), each
worker's (``run`` or ``done`` per queue), the global listener's per producer (``recover``,
``announce``, ``status`` per callback kind), then the scheduler's (``deliver``, or ``poll`` per
producer and kind).  Each section is rooted at the fields its guard reads first.
tests/model/recovery_deferral/test_packed.py compares these successors with ``successors`` on every
reachable state of the small named configurations, and whole searches packed and as tuples.
"""

from __future__ import annotations

from conq.model.engines.action_view import Layout, action_view, sequences

#: a layout whose queues or backlogs could hold more sequences than this is not packed (the explorer
#: searches its states as tuples)
MAX_DOMAIN = 200_000


def layout(model) -> tuple[Layout, tuple, dict] | None:
    """``(layout, shape, fields)``: the fields of a state with their domains, the state's nested
    shape, and the field indices by name (``fields["fed"][p]``, ...); None when a domain is too large."""
    c = model.config
    P, Q, K, R, n = c.producers, c.queues, len(c.callbacks), c.recoveries, model.n_events
    lay = Layout()
    f: dict = {}
    f["fed"] = lay.fields("fed", P, lambda p: range(len(model.script[p]) + 1))
    by_queue = [[e for e in range(n) if q in model.ev_queues[e]] for q in range(Q)]
    if any(len(sequences(es, c.queue_size)) > MAX_DOMAIN for es in by_queue):
        return None
    f["queues"] = lay.fields("queue", Q, lambda q: sequences(by_queue[q], c.queue_size))
    f["running"] = lay.fields("running", Q, lambda q: [-1] + by_queue[q])  # a worker runs its queue's head
    f["status"] = lay.fields("status", n, range(6))
    tracked = [sum(1 for e in range(n) if model.ev_ctx[e] == x) for x in range(model.n_ctx)]
    # a task is counted before it is queued (the reference), or (DEV-009) may complete first: below 0
    f["pending"] = lay.fields("pending", model.n_ctx, lambda x: range(0 if c.count_before_enqueue else -tracked[x],
                                                                      tracked[x] + 1))
    f["entries"] = lay.field("entries", range(1 << model.n_ctx))
    f["slot"] = lay.field("slot", [-1] if c.count_before_enqueue else range(-1, n))  # DEV-009's second step only
    f["rec"] = lay.fields("rec", P, range(R + 1))
    f["notes"] = tuple(lay.fields(f"notes[{p}]", K, range(7)) for p in range(P))
    # a read that delivers later (DEV-015, poll_then_deliver) only
    f["sched"] = lay.field("sched", [()] + ([(p, r, k) for p in range(P) for r in range(R + 1) for k in range(K)]
                                            if c.poll_then_deliver else []))
    by_match = [[e for e in range(n) if model.ev_match[e] == m and model.ev_ordered[e]] for m in range(c.matches)]
    if any(len(sequences(es, len(es))) > MAX_DOMAIN for es in by_match):
        return None
    f["backlog"] = lay.fields("backlog", c.matches, lambda m: sequences(by_match[m], len(by_match[m])))
    f["told"] = lay.fields("told", P, range(R + 1))
    f["upctx"] = tuple(lay.fields(f"upctx[{p}]", K, range(R + 1)) for p in range(P))
    shape = (f["fed"], f["queues"], f["running"], f["status"], f["pending"], f["entries"], f["slot"], f["rec"],
             f["notes"], f["sched"], f["backlog"], f["told"], f["upctx"])
    return lay, shape, f


def universe(model) -> list[tuple]:
    """Every action, in the order ``RecoveryDeferralModel.actions`` lists the enabled ones."""
    c = model.config
    P, Q, K = c.producers, c.queues, len(c.callbacks)
    acts: list[tuple] = [("feed", p) for p in range(P)] + [("track",)]
    for q in range(Q):
        acts += [("run", q), ("done", q)]
    for p in range(P):
        acts += [("recover", p), ("announce", p)] + [("status", p, k) for k in range(K)]
    acts.append(("deliver",))
    acts += [("poll", p, k) for p in range(P) for k in range(K)]
    return acts


def packed_view(model):
    """The packed view, or None when the layout's domains are too large to pack."""
    found = layout(model)
    if found is None:
        return None
    lay, shape, f = found

    def roots(a: tuple) -> list[int]:
        name = a[0]
        if name == "feed":
            return [f["slot"], f["fed"][a[1]]]
        if name == "track":
            return [f["slot"]]
        if name in ("run", "done"):
            return [f["running"][a[1]]] + ([f["queues"][a[1]]] if name == "run" else [])
        if name == "recover":
            return [f["rec"][a[1]]]
        if name == "announce":
            return [f["told"][a[1]], f["rec"][a[1]]]
        if name == "status":
            return [f["notes"][a[1]][a[2]]]
        if name == "deliver":
            return [f["sched"]]
        return [f["sched"], f["notes"][a[1]][a[2]]]  # poll

    return action_view(model, lay, shape, universe(model), roots)
