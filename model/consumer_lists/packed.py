"""The consumer-lists model packed for the explorer (issue 18; the machinery: model/engines/packing.py).

The state is the flat tuple of model.py; each field's domain follows from the configuration
(:func:`field_domains`), so a state packs into one integer (the reference: 55 bits).  The successor
function is cut into the sections of :meth:`~.model.ConsumerListsModel.spec_successors`, in its
order, each running the model's own readable step code and remembered by the fields it reads:

* per consumer ``c``, its IO thread (``_io_steps``), rooted at its program counter and wake bit:
  an idle thread that was not woken reads little else;
* per entry ``j``, the publishing thread that owes its ``notifyConsumers`` (``_publisher_step``),
  rooted at that owed notification;
* the other actors (``_actor_successors``: housekeeping, reject, groups), rooted at their fields;
* per consumer ``c``, the environment's steps on it (``_environment_steps``), rooted at its node
  and the environment's budget;
* the environment's message steps (``_message_steps``), rooted at the statuses and the budget.

The IO threads, the publishers and the other actors say whether a step is owed; when none is, the
model may stutter (``idle``), as in ``spec_successors``.  tests/model/consumer_lists/test_packed.py
checks on every reachable state of the small named configurations that the packed successors,
decoded, are ``spec_successors``' in the same order, and that the memoised predicates agree with
the properties.
"""

from __future__ import annotations

from itertools import permutations

from conq.model.engines.packing import Codec, Packed, Section, StepChecks

from .state import ACQ, AVAILABLE, CF, DELETED, F_NODE, F_PC, F_WAKE, HELD, NODE_NAMES, TAKE, UNARRIVED

_CONSUMER_FIELDS = ("node", "pc", "wake", "flag", "credit", "susp", "seen")


def field_domains(model) -> list:
    """The values each field of a reachable state takes by the model's design, from the
    configuration alone: a browser never records an acquirer's seen set, only acquirers hold
    entries, an entry is held only with ``held`` and deleted only with ``expiry``, the budget is -1
    only when unbounded.  They are hints, not claims: a state outside them raises PackingError, and
    the explorer then searches the states as tuples (explorer.py), so a variant that broke one of
    them is still checked, with its counterexample.  Tight domains keep the reference within 64 bits
    (62): a state is then its own exact fingerprint, and a state list is an array of machine words."""
    cfg = model.config
    n, m = model.n, model.m
    doms: list = []
    for c in range(n):
        doms += [
            range(len(NODE_NAMES)),  # every node state (the lists' claims judge which are right)
            range(TAKE + 2 * m),  # IDLE..START, TAKE + j (found j), GOT + j (acquired j)
            range(2),  # wake
            range(2),  # notifyWorkDesired flag
            range(cfg.max_credit + 1),
            range(1 << max(cfg.reasons, 0)),  # suspension reasons
            range(1) if model.acq[c] else range(1 << m),  # seen: only a browser marks entries seen
        ]
    status = ([DELETED] if cfg.expiry else []) + [UNARRIVED, AVAILABLE] + ([HELD] if cfg.held else []) \
        + [ACQ + c for c in range(n) if model.acq[c]]
    for _j in range(m):
        doms.append(tuple(status))
        doms.append(range(2))  # a publishing thread owes notifyConsumers
    doms += [range(1 << n)] * 4  # All, NotInterested, NonAcquiring, Notified: bit masks
    for p in model.levels:
        members = [c for c in range(n) if model.prio[c] == p]
        doms.append(tuple(t for k in range(len(members) + 1) for t in permutations(members, k)))
    doms.append(range(-1, 0) if cfg.env_budget < 0 else range(cfg.env_budget + 1))  # -1: unbounded
    doms += _actor_domains(model)
    if len(doms) != model.END:  # pragma: no cover - a layout change not followed here
        raise AssertionError(f"consumer-lists packing: {len(doms)} domains for {model.END} fields")
    return doms


def _actor_domains(model) -> list[tuple]:
    n, m = model.n, model.m
    doms: list[tuple] = []
    if model.REJ is not None:
        doms += [range(1 << n)] * m  # per message: who rejected it
    if model.DP is not None:
        doms.append(range(1 << m))  # the messages a delete waits for
    if model.GOWN is not None:
        doms += [range(n + 1)] * model.G  # per group: its consumer + 1
        doms.append(range(1 << m))  # entries a shared group counted
        doms.append(range(2))  # a pointer reset is owed
    return doms


def field_names(model) -> list[str]:
    names = [f"consumer {c} {f}" for c in range(model.n) for f in _CONSUMER_FIELDS]
    for j in range(model.m):
        names += [f"message {j} status", f"message {j} notification owed"]
    names += ["All", "NotInterested", "NonAcquiring", "Notified"]
    names += [f"Interested (priority {p})" for p in model.levels]
    names.append("environment budget")
    names += [f"actor field {i}" for i in range(model.BUD + 1, model.END)]
    return names


def packed_view(model) -> Packed:
    codec = Codec(field_domains(model), field_names(model))
    checks = StepChecks(model.property_list())
    n, MB, LB, BUD, END = model.n, model.MB, model.LB, model.BUD, model.END
    statuses = list(range(MB, LB, 2))
    pends = list(range(MB + 1, LB, 2))

    def io(c: int):
        return lambda s, out: model._io_steps(s, c, out)

    def env(c: int):
        def run(s, out):
            model._environment_steps(s, c, out)
            return False
        return run

    def publisher(j: int):
        return lambda s, out: model._publisher_step(s, j, out)

    def msg(s, out):
        model._message_steps(s, out)
        return False

    fair = [Section(codec, io(c), [c * CF + F_PC, c * CF + F_WAKE], checks, f"io {c}") for c in range(n)]
    # one publishing thread per entry (each reads what its own notifyConsumers reads)
    fair += [Section(codec, publisher(j), [pends[j]], checks, f"publisher {j}") for j in range(model.m)]
    if END > BUD + 1:
        fair.append(Section(codec, model._actor_successors, range(BUD + 1, END), checks, "other actors"))
    other = [Section(codec, env(c), [c * CF + F_NODE, BUD], checks, f"environment {c}") for c in range(n)]
    other.append(Section(codec, msg, statuses + [BUD], checks, "messages"))
    return Packed(codec, model.init_states(), fair, other, ("idle",))

