"""The ordered-consumption model packed for the explorer (issue 36; the machinery:
model/engines/action_view.py and model/engines/packing.py).

A state is one of the roles' shapes (state.py): the producer's flat record, a push consumer's
``(role, msgs, pqs, final)`` (several clients of a group: ``(role, server, clients, final)``) or
the simple consumer's ``(role, msgs, rr, calls)``; the role, the first field, is the layout's tag
(:class:`~conq.model.engines.packing.Variants`), so a configuration exploring several roles (the
reference) packs them all.  Each field's domain follows from the configuration: phases, statuses
and flags by their names, counts of deliveries, attempts and consumptions up to one past
``max_attempts`` (the model caps them there: ``min(tot + 1, max_attempts + 1)``), the producer's
attempts up to ``max_send_attempts`` and its back-off to the largest the server may ask.  They are
hints, not claims: a state outside them raises PackingError and the explorer searches the states
as tuples (the tests check that no manifest configuration does).

The successors are the model's own ``step`` per action of :func:`universe`, in the order the
role's ``actions`` lists them (``_p_actions``, ``_c_actions`` / ``_g_actions``, ``_s_actions``);
a section of one role's action steps only states of that role.
tests/model/ordered_consumption/test_packed.py compares these successors with ``successors`` on
every reachable state of small configurations, and whole searches packed and as tuples.
"""

from __future__ import annotations

from conq.model.engines.action_view import Layout, action_view
from conq.model.engines.packing import Variants

from .state import FIFO, PRODUCER, SIMPLE, STANDARD

_PUSH = (STANDARD, FIFO)
_MSG_STEPS = ("consume", "next_attempt_delay", "ack", "change_invisible", "forward_to_dlq")


def layout(model) -> tuple[Layout, Variants, int]:
    """``(layout, shape, tag)``: every role's fields with their domains, the shape per role, the tag."""
    c = model.config
    Q, n, A = c.queues, model.n_msgs, c.max_attempts
    count = range(A + 2)  # deliveries, attempts, consumptions: capped one past max_attempts
    lay = Layout()
    tag = lay.field("role", model.roles)
    shapes: dict = {}

    def copy(name: str) -> tuple:  # a client's record of a message (state.py: cli .. total)
        return (lay.field(f"{name}.cli", range(7)), lay.field(f"{name}.in_cache", range(2)),
                lay.field(f"{name}.consumed", count), lay.field(f"{name}.copy", count),
                lay.field(f"{name}.pending", count), lay.field(f"{name}.memo", range(3)),
                lay.field(f"{name}.old", range(2)), lay.field(f"{name}.ok_on", count),
                lay.field(f"{name}.total", count))

    def process_queues(name: str) -> tuple:  # (waiting, notified, locked, worker, assigned)
        return tuple((lay.field(f"{name}[{p}].waiting", range(2)), lay.field(f"{name}[{p}].notified", range(2)),
                      lay.field(f"{name}[{p}].locked", range(2)), lay.field(f"{name}[{p}].worker", range(4)),
                      lay.field(f"{name}[{p}].assigned", range(2))) for p in range(Q))

    if PRODUCER in model.roles:
        backoffs = sorted({0, *c.backoffs})
        shapes[PRODUCER] = (tag, lay.field("phase", range(5)), lay.field("mtype", range(3)),
                            lay.field("mask", range(1 << Q)), lay.field("group", range(Q)),
                            lay.field("sent", range(c.max_send_attempts + 1)), lay.field("queue", range(-1, Q)),
                            lay.field("backoff", backoffs), lay.field("elapsed", range(max(backoffs) + 1)),
                            lay.field("result", range(3)))
    push = [r for r in _PUSH if r in model.roles]
    if push:
        if model.multi:
            server = tuple((lay.field(f"m{m}.srv", range(5)), lay.field(f"m{m}.delivered", count)) for m in range(n))
            clients = tuple((tuple(copy(f"c{i}.m{m}") for m in range(n)), process_queues(f"c{i}.pq"))
                            for i in range(c.consumers))
            body = (server, clients)
        else:
            msgs = tuple((lay.field(f"m{m}.srv", range(5)), lay.field(f"m{m}.delivered", count)) + copy(f"m{m}")
                         for m in range(n))
            body = (msgs, process_queues("pq"))
        final = lay.field("assignment_stable", range(2))
        for r in push:  # the two push roles share their fields: one of them at a time
            shapes[r] = (tag, *body, final)
    if SIMPLE in model.roles:
        shapes[SIMPLE] = (tag, tuple((lay.field(f"s.m{m}.srv", range(5)), lay.field(f"s.m{m}.delivered", count),
                                      lay.field(f"s.m{m}.held", range(3))) for m in range(n)),
                          lay.field("rr", range(Q)),
                          tuple((lay.field(f"th{t}.op", range(4)), lay.field(f"th{t}.message", range(-1, n)),
                                 lay.field(f"th{t}.requests", range(3))) for t in range(c.simple_threads)))
    return lay, Variants(tag, shapes), tag


def universe(model) -> list[tuple[tuple, tuple]]:
    """``(action, the roles it steps)`` for every action, in the order each role's ``actions``
    lists the enabled ones."""
    c = model.config
    Q, n = c.queues, model.n_msgs
    out: list[tuple[tuple, tuple]] = []
    if PRODUCER in model.roles:
        out += [(a, (PRODUCER,)) for a in [("fetch_route",), ("pick",)] + [("send", q) for q in range(Q)]
                + [("tick",), ("retry",)]]
    push = tuple(r for r in _PUSH if r in model.roles)
    if push:
        acts: list[tuple] = []
        for i in range(c.consumers if model.multi else 1):
            def g(name: str, y: int, i: int = i) -> int:
                return model.group_param(name, i, y) if model.multi else y
            acts += [("receive", g("receive", p)) for p in range(Q)]
            for p in range(Q):
                acts += [(name, g(name, p)) for name in ("dispatch", "take", "unlock")]
            for m in range(n):
                acts += [(name, g(name, m)) for name in _MSG_STEPS] + ([] if model.multi else [("expire", m)])
            if c.rebalance:
                for p in range(Q):
                    acts += [(name, g(name, p)) for name in ("drop_process_queue", "create_process_queue")]
        if model.multi:
            acts += [("expire", m) for m in range(n)]
        acts.append(("assignment_stable",))
        out += [(a, push) for a in acts]
    if SIMPLE in model.roles:
        acts = []
        for th in range(c.simple_threads):
            acts.append(("call_receive", th))
            for m in range(n):
                acts += [("call_ack", th, m), ("call_change_invisible", th, m)]
            acts.append(("rpc", th))
        for m in range(n):
            acts += [("abandon", m), ("expire", m)]
        out += [(a, (SIMPLE,)) for a in acts]
    return out


def packed_view(model):
    lay, shape, tag = layout(model)
    acts = universe(model)
    return action_view(model, lay, shape, [a for a, _ in acts], lambda a: [tag],
                       [lambda s, roles=roles: s[0] in roles for _a, roles in acts])
