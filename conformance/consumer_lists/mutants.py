# One file: the catalogue is read as one page, each mutant beside the engines that must kill it and the count budgets they spend (the kill matrix of `conq mutants`).
"""The consumer-lists mutant catalogue: plausible bugs of the reference implementation
(``conq.impl.consumer_lists``), and the engines that must catch each of them.

The generic machinery (applying a mutant, count budgets with a safety cap, the kill matrix) is
:mod:`conq.conformance.mutation`.  ``conq mutants`` runs every engine against every mutant and
prints the kill matrix with the count each engine spent; a mutant no engine kills is a hole in the
suite.

Engines (each spends a *count*, scaled by ``Budget.scale``; seconds only cap):

* ``explorer``  : every call sequence of up to ``EXPLORER_DEPTH`` calls on each configuration,
                  shortest first (a mutant with a short counterexample is always killed), then
                  the shortest model path to every leaf of the bounded state graph, replayed
                  against the implementation;
* ``random``    : seeded random walks from the consistent model states;
* ``hypothesis``: a hypothesis state machine driving implementation and model
                  side by side (shrinks to a minimal failing run);
* ``pct``       : probabilistic concurrency testing (``pct.py``; Burckhardt et al., ASPLOS
                  2010) of the stress workload in small, the schedules engine's shapes and
                  the other actors' race scenarios, every thread under the deterministic
                  scheduler: random priorities and d - 1 change points over the k steps of
                  a run, depths 1-3 (a depth-d bug: >= 1/(n k^(d-1)) per run); a failure
                  replays from its seed and is minimised;
* ``stress`` (``SOAK_ENGINES``, not in the matrix by default): the real-thread workload
                  (publishers, connections, priorities, browsers, flow toggling): nothing
                  lost, nothing acquired twice, browsers saw everything, no stall -- random
                  timing: a throughput and soak run, not a bug finder (issue 32: ``pct``
                  replaced it; ``bench/cl_pct_vs_stress.py`` compares them);
* ``schedules`` : the same workload under the deterministic scheduler, lock releases
                  and the model's thread steps being interleaving points: first every
                  schedule with <= 1 (then 2) deviations from the default schedule over
                  small workloads, fewest first (systematic), then PCT seeds; a failure is
                  minimised (delta debugging) and printed as a readable interleaving;
* ``linearizability``: concurrent node-list histories on real threads checked
                  against the sequential specification;
* ``stress-actors`` (``SOAK_ENGINES``): the all-actors workload on real threads (``actors_workload``): every
                  actor of issue 16 at once, nothing lost or acquired twice, no redelivery to
                  a rejecter, group ownership, no stall (random timing: throughput and soak);
* ``thread-steps``: the thread level (``thread_steps.py``): the reference's threads stepped one
                  model step at a time, the checker choosing the interleaving (seeded walks);
                  it sees ``unnotify-after-scan``, which no call-level engine can (the
                  ``schedules`` workload finds it too, as a stall);
* ``races``     : the other actors (issue 16) racing the consumers on the deterministic
                  scheduler (``races.py``): a pull against a delete or the housekeeping
                  thread's expiry, a delete waiting for a held entry, a reject, a message
                  group freed while another consumer pulls; every schedule with 0, 1, then 2
                  deviations, fewest first, checked against the model's claims for them.

The trace engines (``explorer``, ``random``, ``hypothesis``) run on ``TRACE_CONFIGS`` first, then
on ``ACTOR_CONFIGS`` (the other actors switched on), so a mutant of the original paths meets the
same traces as before the actors existed.
"""

from __future__ import annotations

from unittest import mock

from conq.conformance.mutation import Budget, Catalogue, Clock, Detection, Mutant
from conq.impl.consumer_lists import delivery as _delivery
from conq.impl.consumer_lists import node_list as _nl
from conq.impl.consumer_lists import queue as _q
from conq.impl.consumer_lists.consumer_manager import NodeState, QueueConsumerManager

Q = _q.Queue


# -- the bugs -------------------------------------------------------------------------------------


def _notify_every_acquirer(self, entry, *, browsers=True):
    if browsers:
        for b in self.qcm.non_acquiring_consumers():
            self._notify_consumer(b)
    for c in list(self.qcm.interested()):
        if entry.state is not _q._AVAILABLE:
            break
        self._try_notify(c)


def _notify_no_acquirer(self, entry, *, browsers=True):
    if browsers:
        for b in self.qcm.non_acquiring_consumers():
            self._notify_consumer(b)


def _notify_no_browser(self, entry, *, browsers=True):
    for c in self.qcm.interested():
        if entry.state is not _q._AVAILABLE:
            break
        if self._try_notify(c) is not False:
            break


_original_deliver = Q.deliver_single_message


def _look_then_unnotify(self, c):
    """Looks for a message first and moves NOTIFIED -> INTERESTED only when it found none."""
    if c.closed:
        return None
    if not c.desired:
        self.qcm.set_notified(c, False)
        return None
    entry = self._attempt_delivery(c) if c.acquires else self._attempt_browse(c)
    if entry is None:
        self.qcm.set_notified(c, False)
        if c.acquires and self._available > 0:
            self._notify_other_consumers(c)
        return None
    c.delivered += 1
    c._settle_credit()  # as the reference: a credit that ran out is told after the send
    return entry.id


def _never_unnotify(self, c):
    """Never leaves NOTIFIED: the move back to Interested is forgotten."""
    if c.closed or not c.desired:
        return None
    entry = self._attempt_delivery(c) if c.acquires else self._attempt_browse(c)
    if entry is None:
        if c.acquires and self._available > 0:
            self._notify_other_consumers(c)
        return None
    c.delivered += 1
    self.qcm.set_notified(c, True)
    c._settle_credit()  # as the reference: a credit that ran out is told after the send
    return entry.id


def _has_work_ignoring_priority(self, c):
    if not c.acquires:
        return True
    with self._lock:
        return self._peek_acquirable_locked() is not None


def _attempt_delivery_ignoring_priority(self, c):
    with self._lock:
        entry = self._peek_acquirable_locked()
    if entry is None or not c._allocate_credit():
        return None
    with self._lock:
        lost = entry.state is not _q._AVAILABLE or c.closed
        if not lost:
            entry.state = _q._ACQUIRED
            entry.owner = c.id
            self._available -= 1
            c._acquired.add(entry.id)
    if lost:
        c._restore_credit()
        return None
    return entry  # the credit's loss of interest is told after the send, as the reference


def _peek_acquired_too(self):
    """The read position does not skip entries another consumer acquired."""
    cur = self._cursor
    nxt = cur.next
    while nxt is not None and nxt.state not in (_q._AVAILABLE, _q._ACQUIRED):
        cur = nxt
        nxt = nxt.next
    return nxt


def _acquire_without_check(self, c):
    with self._lock:
        entry = _peek_acquired_too(self)
    if entry is None:
        return None
    if c.priority != _q.DEFAULT_PRIORITY and self.qcm.desired_at_higher_priority(c.priority):
        return None
    if not c._allocate_credit():
        return None
    with self._lock:
        closed = c.closed  # as the reference: no acquisition after remove_consumer's release
        if not closed:
            if entry.state is _q._AVAILABLE:
                self._available -= 1
            entry.state = _q._ACQUIRED
            entry.owner = c.id
            c._acquired.add(entry.id)
    if closed:
        c._restore_credit()
        return None
    return entry  # the credit's loss of interest is told after the send, as the reference


def _no_notify_others(self, excluded):
    return None


def _set_desired_no_handover(self, c, desired):
    if c.node is None:
        raise _q.QueueError("not on this queue")
    if not self.qcm.set_interest(c, desired):
        return False
    if desired:
        self._notify_consumer(c)
    return True


_original_remove = Q.remove_consumer


def _remove_no_handover(self, consumer, *, release_acquired=True):
    with mock.patch.object(Q, "_notify_after_loss_of_interest", lambda self: None):
        return _original_remove(self, consumer, release_acquired=release_acquired)


_original_release = Q.release


def _release_no_notify(self, msg_id, consumer=None):
    with mock.patch.object(Q, "_notify_consumers", lambda self, entry, browsers=True: None):
        return _original_release(self, msg_id, consumer)


_original_unhold = Q.unhold


def _unhold_no_notify(self, msg_id):
    with mock.patch.object(Q, "_notify_consumers", lambda self, entry, browsers=True: None):
        return _original_unhold(self, msg_id)


_original_add = Q.add_consumer


def _add_no_notify(self, consumer_id, **kw):
    with mock.patch.object(Q, "_notify_consumer", lambda self, c: False):
        return _original_add(self, consumer_id, **kw)


def _browse_acquires(self, b):
    return _attempt_delivery_ignoring_priority(self, b)


_original_set_interest = QueueConsumerManager.set_interest


def _browser_goes_interested(self, consumer, interested):
    node = consumer.node
    if interested:
        return node.move_from_to(_cm_mask("NOT_INTERESTED"), _cm_state("INTERESTED"))
    return _original_set_interest(self, consumer, interested)


def _cm_state(name):
    from conq.impl.consumer_lists.consumer_manager import NodeState

    return NodeState[name]


def _cm_mask(name):
    return 1 << _cm_state(name)


_original_set_notified = QueueConsumerManager.set_notified


def _requeue_to_front(self, consumer, notified):
    """Back to the *front* of Interested instead of the back."""
    moved = _original_set_notified(self, consumer, notified)
    if moved and not notified and consumer.acquires:
        level = consumer.node.level
        others = [n for n in level.interested if n is not consumer.node]
        for n in [consumer.node] + others:
            n.entry.owner.remove(n.entry)
            n.entry = level.interested.append(n)
    return moved


def _allocate_credit_free(self):
    """Credit is never charged (a credit window that is never enforced)."""
    return True


def _restore_credit_lost(self):
    """A failed acquisition does not give the credit back."""
    return None


def _unlink_tail(self, prev):
    """Unlinks deleted entries including the physical tail: a concurrent append after it is lost."""
    n = prev.next
    while n is not None and n.deleted:
        prev.next = n.next  # also when n is the tail, which appends still link after
        n = prev.next
    return n


def _remove_counts_twice(self, entry):
    """Decrements the size even when the entry was already deleted."""
    with self._lock:
        was = entry.deleted
        entry.deleted = True
        self.size -= 1
    return not was


def _unschedule_after_release(self):
    """``Connection.process`` with ``scheduled = False`` moved from inside the connection lock to
    just after its release: a ``notify_work`` in that window finds the connection still scheduled,
    does not schedule it again, and its work is never processed (lost wake-up).  Sequentially the
    same; on the old scheduler (switch points only at lock acquires) the window was never open."""
    sent = 0
    while True:
        with self._lock:
            sessions = self._pending
            if not sessions or self.closed:
                self._pending = {}
                break
            self._pending = {}
        for session in sessions:
            sent += session.process()
    self.scheduled = False  # the order swap: after the release, not before it
    return sent


# -- the other actors (issue 16) --------------------------------------------------------------


def _may_take_ignoring_groups(self, c, entry):
    """``mightAssign`` forgotten: only the rejecters are kept away from an entry."""
    rb = entry.rejected_by
    return rb is None or c.id not in rb


def _accept_taking_over(self, c, entry):
    """``acceptMessage`` never refuses: the group passes to whoever acquires one of its entries."""
    g = entry.group
    self._group_owner[g] = c
    if self.group_policy == "shared":
        entry.counted = True
        self._group_count[g] = self._group_count.get(g, 0) + 1
    return True


def _after_delete_silent(self, reset):
    """Upstream ``deleteEntry``: after the delete nobody is notified (DEV-016 reversed)."""
    if reset:
        self._reset_sub_pointers_for_groups()


def _attempt_delivery_acquires_deleted(self, c):
    """The acquire's CAS does not fail on a DELETED entry: a consumer that found an entry the
    housekeeping thread (or a management delete) took meanwhile acquires it anyway, silently."""
    if self._det:
        self._point("pull.find", c.id)
    with self._lock:
        entry = self._next_for_locked(c)
    if entry is None:
        return None
    if c.priority != _q.DEFAULT_PRIORITY and not self._no_higher(c, entry):
        return None
    if not c._allocate_credit():
        return None
    if self._det:
        self._point("pull.acquire", c.id)
    with self._lock:
        acquired = entry.state is not _q._ACQUIRED and not c.closed  # the bug: DELETED passes
        if acquired and self.group_policy is not None and entry.group is not None:
            acquired = self._accept_locked(c, entry)
        if acquired:
            if entry.state is _q._AVAILABLE:
                self._available -= 1
                if entry.group is not None:
                    self._group_avail[entry.group] -= 1
            entry.state = _q._ACQUIRED
            entry.owner = c.id
            entry.sent = False
            c._acquired.add(entry.id)
    if acquired:
        return entry  # the credit's loss of interest is told after the send, as the reference
    c._restore_credit()  # lost: the pull ends, as the reference
    return None


_original_delete_entry = Q._delete_entry


def _delete_steals_unsent(self, msg_id, reason):
    """``makeAcquisitionStealable`` forgotten: a delete steals an acquisition its consumer has not
    sent yet, instead of waiting for the send (the IO thread then sends an entry it no longer holds)."""
    with self._lock:
        entry = self._entries.get(msg_id)
        if entry is not None and entry.state is _q._ACQUIRED:
            entry.sent = True
    return _original_delete_entry(self, msg_id, reason)


def _unhold_dropping_delete(self, msg_id):
    """A delete that waits for a held entry is forgotten when the entry is un-held: the entry is
    offered to consumers instead of deleted."""
    with self._lock:
        entry = self._entries.get(msg_id)
        if entry is not None and entry.delete_pending is not None:
            entry.delete_pending = None
            self._delete_waiting.discard(msg_id)
    return _original_unhold(self, msg_id)


def _reject_as_release(self, msg_id, consumer):
    """Reject forgets the rejecter (``QueueEntryImpl.reject`` without ``_rejectedBy``): the entry is
    simply released, and the rejecting consumer may be given it again."""
    if not self.release_owned(msg_id, consumer):
        raise _q.QueueError(f"reject of message {msg_id} by {consumer.id!r}: it does not hold it")
    return True


def _group_left_never_frees(self, entry):
    """The shared group's listener counts the entry out but never gives the group up: the group
    stays with its consumer after its last entry was settled or released."""
    if not entry.counted:
        return False
    entry.counted = False
    g = entry.group
    self._group_count[g] = self._group_count[g] - 1
    return False


def _no_group_reset(self):
    """``resetSubPointersForGroups`` forgotten: when a group is freed, no consumer's pointer moves
    back and nobody is notified of the group's waiting entries."""
    return None


def _unregister_keeps_assignments(self, c):
    """Standard groups: ``clearAssignments`` forgotten on removal: the group stays assigned to the
    removed consumer for ever."""
    mine = [g for g, owner in self._group_owner.items() if owner is c]
    return any(self._group_avail.get(g, 0) > 0 for g in mine)


def _unnotify_after_scan(self, c):
    """deliverSingleMessage as the reference (same scheduling points), but NOTIFIED -> INTERESTED
    happens only after the scan (``_attempt_delivery``), not before it (upstream
    AbstractQueue.deliverSingleMessage: setNotified(false) first; model ``_pull_start``).  The
    consumer is NOTIFIED while it looks, so a publisher notifying meanwhile skips it: a lost wake-up
    window.  Only the thread level can see it: at call level a pull runs atomically and ends in the
    same state either way (INTERESTED when nothing was found, NOTIFIED after a delivery)."""
    if c.closed:
        return None
    if not c._deliver_guard.acquire(False):
        raise _q.QueueError(f"deliver_single_message for consumer {c.id!r} called concurrently with itself")
    try:
        if self._det:
            self._point("pull.unnotify", c.id)
        if not c.desired:
            self.qcm.set_notified(c, False)
            return None
        entry = self._attempt_delivery(c) if c.acquires else self._attempt_browse(c)
        self.qcm.set_notified(c, False)  # the bug: back to INTERESTED only after scanning
        if entry is None:
            if self._det:
                self._point("pull.none", c.id)
            if c.acquires and self._available > 0:
                self._notify_other_consumers(c)
            return None
        c.delivered += 1
        if self._det:
            self._point("pull.deliver", c.id)
        self.qcm.set_notified(c, True)
        if c.acquires:
            self._sent(c, entry)
        c._settle_credit()  # as the reference: a credit that ran out is told after the send
        return entry.id
    finally:
        c._deliver_guard.release()


def _desire_queue_before_flag(self):
    """``setNotifyWorkDesired`` in upstream's order (AbstractConsumerTarget.setNotifyWorkDesired
    tells its consumers -- the queue -- before it writes ``_notifyWorkDesired``), at the reference's
    scheduling points (``desired.flag``, ``desired.queue``).  Between the two a pull of the consumer
    that the queue just notified still reads "does not want work", returns at once and uses up the
    wake-up: a lost wake-up window (model: the ``upstream-flag-order`` configuration).  Invisible at
    call level, where both halves run inside one call and end alike (the reference's queue never
    reads the flag: its priority check reads the consumer lists); the thread level runs each half as
    a step of its own (issue 17) and sees the queue told at the step the model calls the flag."""
    desired = self._compute_desired()
    if desired != self.desired:
        tell = self.node is not None and not self.closed
        if tell and self.queue._det:
            self.queue._point("desired.flag", self.id)
        if tell:
            self.queue.set_notify_work_desired(self, desired)  # the bug: the queue first
            if self.queue._det:
                self.queue._point("desired.queue", self.id)
        self._write_flag(desired, tell)


def _no_higher_reading_lists(self, c, entry):
    """The priority check reads the consumer lists (Interested or Notified: "wants work") instead of
    the target's flag -- the reference before issue 17's thread level.  Between a higher consumer's
    setNotifyWorkDesired halves (flag written, lists not yet moved) a lower-priority consumer takes
    the entry the model keeps for the higher one (the model's and upstream's
    ``noHigherPriorityWithCredit`` read the flag).  Invisible at call level, where both halves run
    in one call, so flag and lists agree between calls."""
    if c.priority == _q.DEFAULT_PRIORITY or not self.qcm.desired_at_higher_priority(c.priority):
        return True
    if not self._excl:
        return False
    higher = [h for h in self.qcm.all() if h.priority > c.priority and h.acquires
              and h.state in (NodeState.INTERESTED, NodeState.NOTIFIED)]
    rb = entry.rejected_by if entry is not None else None
    with self._lock:
        for h in higher:
            if rb is not None and h.id in rb:
                continue
            if self._next_for_locked(h) is not None:
                return False
    return True


_QCM = QueueConsumerManager
_QC = _q.QueueConsumer
_NL = _nl.NodeList
_CONN = _delivery.Connection

MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in [
        Mutant("notify-every-acquirer", "a new message notifies every interested acquiring consumer (spurious wake-ups)", "notification choice",
               ((Q, "_notify_consumers", _notify_every_acquirer),)),
        Mutant("notify-no-acquirer", "a new message notifies browsers only: acquiring consumers are never woken (lost wake-up)", "lost wake-up",
               ((Q, "_notify_consumers", _notify_no_acquirer),)),
        Mutant("browsers-missed", "a new message does not notify the browsers", "browsers",
               ((Q, "_notify_consumers", _notify_no_browser),)),
        Mutant("look-then-unnotify", "deliverSingleMessage looks before moving NOTIFIED -> INTERESTED (lost wake-up window)", "lost wake-up",
               ((Q, "deliver_single_message", _look_then_unnotify),)),
        Mutant("unnotify-after-scan", "a delivery moves the consumer back to INTERESTED only after scanning "
               "(issue 17): invisible at call level, where a pull is atomic", "lost wake-up window",
               ((Q, "deliver_single_message", _unnotify_after_scan),)),
        Mutant("priority-reads-lists", "the priority check takes a higher consumer's list (Interested, Notified) "
               "for its target's flag (issue 17): invisible at call level, where flag and lists agree between calls",
               "priority inversion window", ((Q, "_no_higher", _no_higher_reading_lists),)),
        Mutant("desire-queue-before-flag", "setNotifyWorkDesired tells the queue before it writes the target's flag "
               "(upstream's order; issue 17): invisible at call level, where both halves run in one call",
               "lost wake-up window", ((_q.QueueConsumer, "_update_desired_locked", _desire_queue_before_flag),)),
        Mutant("never-unnotify", "a notified consumer is never moved back to Interested", "list moves",
               ((Q, "deliver_single_message", _never_unnotify),)),
        Mutant("priority-ignored", "no noHigherPriorityWithCredit check: a lower priority consumer takes work a higher one wants", "priority inversion",
               ((Q, "_has_work_for", _has_work_ignoring_priority), (Q, "_attempt_delivery", _attempt_delivery_ignoring_priority))),
        Mutant("double-acquire", "acquisition neither skips nor re-checks entries other consumers acquired", "double acquisition",
               ((Q, "_attempt_delivery", _acquire_without_check),)),
        Mutant("no-notify-others", "a consumer that found nothing while messages remain does not pass the wake-up on", "lost wake-up",
               ((Q, "_notify_other_consumers", _no_notify_others),),
               equivalent="in this implementation an acquiring consumer finds nothing while messages remain only "
                          "when a higher-priority consumer wants work, and that consumer was notified when it "
                          "became desired (set_notify_work_desired, add_credit); a consumer removed mid-pull is "
                          "handed over by remove_consumer itself.  The model shows the rule is needed where removal "
                          "hands over only NOTIFIED consumers (spec/consumer-lists.md)."),
        Mutant("notify-without-work", "notifyConsumer does not check that the consumer has a message it may take "
               "(spurious wake-ups on resume, credit and hand-over)", "notification choice",
               ((Q, "_has_work_for", lambda self, c: True),)),
        Mutant("uninterest-no-handover", "a consumer losing interest does not let a lower-priority one take its work", "priority / lost wake-up",
               ((Q, "set_notify_work_desired", _set_desired_no_handover),)),
        Mutant("remove-no-handover", "removing a notified consumer drops its wake-up (upstream behaviour)", "lost wake-up",
               ((Q, "remove_consumer", _remove_no_handover),)),
        Mutant("release-no-notify", "a released message does not notify anyone", "lost wake-up",
               ((Q, "release", _release_no_notify),)),
        Mutant("unhold-no-notify", "a message that stops being held does not notify anyone", "lost wake-up",
               ((Q, "unhold", _unhold_no_notify),)),
        Mutant("add-no-notify", "a consumer added while messages wait is not notified (upstream behaviour)", "lost wake-up",
               ((Q, "add_consumer", _add_no_notify),)),
        Mutant("browser-acquires", "a browser acquires the messages it browses", "browsers",
               ((Q, "_attempt_browse", _browse_acquires),)),
        Mutant("browser-interested", "a browser that wants work again is moved to Interested, not NonAcquiring", "list moves",
               ((_QCM, "set_interest", _browser_goes_interested),)),
        Mutant("requeue-to-front", "a consumer that found nothing goes to the front of Interested, not the back", "fairness",
               ((_QCM, "set_notified", _requeue_to_front),)),
        Mutant("credit-ignored", "delivery never charges credit", "credit",
               ((_QC, "_allocate_credit", _allocate_credit_free),)),
        Mutant("node-list-unlinks-tail", "the node list unlinks its physical tail, losing a concurrent append", "node-list race",
               ((_NL, "_find_next", _unlink_tail),)),
        Mutant("node-list-size-twice", "removing an already removed entry decrements the size again", "node-list race",
               ((_NL, "remove", _remove_counts_twice),)),
        Mutant("unschedule-after-release", "the connection clears its scheduled flag just after releasing its lock, "
               "not under it: a wake-up in that window is lost", "lock-release window",
               ((_CONN, "process", _unschedule_after_release),)),
        # -- the other actors (issue 16): housekeeping / management deletes, reject, message groups
        Mutant("group-owner-ignored", "a consumer that does not own a message group takes one of its entries "
               "(mightAssign / acceptMessage never refuse)", "group ownership",
               ((Q, "_may_take_locked", _may_take_ignoring_groups), (Q, "_accept_locked", _accept_taking_over))),
        Mutant("delete-no-notify", "a delete that freed the way for an interested consumer notifies nobody "
               "(upstream deleteEntry, DEV-016)", "lost wake-up",
               ((Q, "_after_delete", _after_delete_silent),)),
        Mutant("acquire-deleted", "a consumer acquires an entry the housekeeping thread deleted after the consumer "
               "found it (the acquire's CAS lets DELETED through): it loses the race with expiry silently",
               "race with expiry", ((Q, "_attempt_delivery", _attempt_delivery_acquires_deleted),)),
        Mutant("delete-steals-unsent", "a delete steals an acquisition that was not sent yet instead of waiting for "
               "the send: the consumer is sent an entry it no longer holds", "race with expiry",
               ((Q, "_delete_entry", _delete_steals_unsent),)),
        Mutant("unhold-drops-delete", "a delete waiting for a held entry is dropped when the entry is un-held: "
               "the entry is delivered instead of deleted", "race with expiry",
               ((Q, "unhold", _unhold_dropping_delete),)),
        Mutant("reject-redelivers", "a rejected entry is released for everyone, the rejecter included "
               "(redelivered to the consumer that rejected it)", "reject",
               ((Q, "reject", _reject_as_release),)),
        Mutant("shared-group-never-freed", "a shared group is never given up once its last entry was settled or "
               "released: the others wait for it for ever", "group ownership",
               ((Q, "_group_left_locked", _group_left_never_frees),)),
        Mutant("group-reset-skipped", "a freed group resets no pointer: nobody is notified of its waiting entries "
               "(resetSubPointersForGroups forgotten)", "lost wake-up",
               ((Q, "_reset_sub_pointers_for_groups", _no_group_reset),)),
        Mutant("assigned-group-kept", "a removed consumer keeps its standard (assigned) groups: their entries wait "
               "for ever", "group ownership",
               ((Q, "_unregister_groups_locked", _unregister_keeps_assignments),)),
    ]
}


def mutant_driver(name: str) -> type:
    """The reference driver with mutant ``name`` applied while a driver is open
    (``--impl mutant:NAME``: how a mutant reaches Spark executors)."""
    if name not in MUTANTS:
        raise ValueError(f"no mutant {name!r} (known: {', '.join(MUTANTS)})")
    base = _driver_cls()
    mutant = MUTANTS[name]

    class MutantDriver(base):  # type: ignore[misc, valid-type]
        def __init__(self, config: dict, seed: int):
            self._mutant = mutant.applied()
            self._mutant.__enter__()
            super().__init__(config, seed)

        def close(self) -> None:
            self._mutant.__exit__(None, None, None)

    MutantDriver.__name__ = f"MutantDriver[{name}]"
    return MutantDriver


# -- engines ------------------------------------------------------------------------------------------


def _driver_cls():
    from .driver import ConsumerListsDriver

    return ConsumerListsDriver


def _checker(config: str, *, record: bool = False):
    from conq.conformance.adapters import InProcess
    from conq.conformance.checker import Checker
    from conq.conformance.views import conformance_model

    model = conformance_model("consumer-lists", config, {"env_budget": ENV_BUDGET})
    return Checker(model, InProcess(_driver_cls()), record=record), model


#: configurations the trace engines run on: together they enable every action
#: (held messages, consumers joining, both suspension reasons, equal priorities)
TRACE_CONFIGS = ("small", "reference", "held", "dynamic", "reasons", "same-priority")
#: ... then these, with the other actors (issue 16) on: deletes / expiry, reject, both group
#: policies, all of them together (run after TRACE_CONFIGS, so the mutants of the original paths
#: meet the same traces first)
#: ENV_BUDGET: environment steps (credit, suspend/resume, release, removal) per run
from .suite_configs import ACTOR_CONFIGS, ENV_BUDGET  # noqa: E402 - one list for the corpus and the engines


#: calls per sequence of the explorer engine's shortest-first phase (every sequence up to it)
EXPLORER_DEPTH = 2
#: seeded random traces of 40 calls (random engine), on TRACE_CONFIGS, then on ACTOR_CONFIGS
RANDOM_TRACES, ACTOR_RANDOM_TRACES = 400, 240
#: schedules of the races engine (every schedule with <= 2 deviations of its scenarios is 8,882)
RACE_SCHEDULES = 1500
#: random walks per thread-level configuration (thread_steps.THREAD_CONFIGS) and their length
THREAD_WALKS, THREAD_LENGTH = 60, 30
#: examples per configuration for the hypothesis engine (the CI test lowers it); on ACTOR_CONFIGS
#: a third of it (their calls are the original ones plus two, and the explorer takes every transition)
HYPOTHESIS_EXAMPLES = 150
#: messages per publisher of the real-thread stress run (three publishers)
STRESS_MESSAGES = 3000
#: schedules of the deterministic-schedule engine: systematic (bounded deviations over the small
#: workloads, fewest deviations first: 0 and 1 are exhaustive within this count), then PCT seeds
SYSTEMATIC_SCHEDULES, PCT_SCHEDULES = 400, 200
#: replays the engine may spend minimising a failing schedule (delta debugging)
SCHEDULE_MINIMISE_REPLAYS = 300
#: runs of the PCT engine, over its programs in rotation (pct.PROGRAMS: 100 each)
PCT_RUNS = 1700
#: concurrent rounds of node-list and queue histories (linearizability engine)
LIN_NODE_ROUNDS, LIN_QUEUE_ROUNDS = 150, 60

_SHORT: dict[tuple[str, int], list[list[tuple]]] = {}
_LEAF_PATHS: dict[str, list[list[tuple]]] = {}


def _short_sequences(cfg: str, depth: int) -> list[list[tuple]]:
    from conq.conformance.generate import action_sequences

    if (cfg, depth) not in _SHORT:
        _, model = _checker(cfg)
        _SHORT[cfg, depth] = list(action_sequences(model, depth))
    return _SHORT[cfg, depth]


def _leaf_paths(cfg: str) -> list[list[tuple]]:
    """The BFS-tree paths to every leaf state (they pass through every reachable
    state) of the call-level model; the model does not depend on the mutant, so
    they are computed once per configuration."""
    from conq.model.engines.explorer import explore

    if cfg not in _LEAF_PATHS:
        _, model = _checker(cfg)
        ex = explore(model, liveness=False)
        _LEAF_PATHS[cfg] = [ex.path(i).actions() for i in ex.leaves()]
    return _LEAF_PATHS[cfg]


_EDGE_PATHS: dict[str, list[list[tuple]]] = {}


def _edge_paths(cfg: str) -> list[list[tuple]]:
    """Call sequences of the call-level model that together take every transition of its bounded
    state graph (a greedy transition cover: from the initial state, an untaken call while the
    current state has one, else the shortest way to the nearest state that has one).  The other
    actors' bugs show on one call from one state (a delete notifying nobody), which the paths to
    every leaf can pass by."""
    from collections import deque

    if cfg not in _EDGE_PATHS:
        _, model = _checker(cfg)
        succ: dict = {}
        init = model.init_states()[0]
        todo = deque([init])
        succ[init] = None
        while todo:
            s = todo.popleft()
            out = [(a, x) for a, _, x in model.successors(s)]
            succ[s] = out
            for _, x in out:
                if x not in succ:
                    succ[x] = None
                    todo.append(x)
        left = {s: list(out) for s, out in succ.items() if out}
        paths: list[list[tuple]] = []
        while left:
            s, path = init, []
            while True:
                if left.get(s):
                    a, x = left[s].pop(0)
                    if not left[s]:
                        del left[s]
                    path.append(a)
                    s = x
                    continue
                # the nearest state with an untaken call, reachable from here
                back = {s: None}
                q2 = deque([s])
                found = None
                while q2 and found is None:
                    u = q2.popleft()
                    for a, x in succ[u]:
                        if x not in back:
                            back[x] = (u, a)
                            if x in left:
                                found = x
                                break
                            q2.append(x)
                if found is None:
                    break
                route = []
                v = found
                while back[v] is not None:
                    u, a = back[v]
                    route.append(a)
                    v = u
                path.extend(reversed(route))
                s = found
            if not path:
                break
            paths.append(path)
        _EDGE_PATHS[cfg] = paths
    return _EDGE_PATHS[cfg]


def engine_explorer(budget: Budget) -> Detection:
    """Shortest first: every call sequence up to ``EXPLORER_DEPTH`` (scaled: depth + 1 per
    doubling) on every configuration, before anything longer; then the path to every leaf; then
    the same on ``ACTOR_CONFIGS``, with paths that take every transition instead of the leaves."""
    clock = Clock(budget)
    depth = EXPLORER_DEPTH + max(0, int(budget.scale).bit_length() - 1)
    replayed = 0
    phases = [("short", cfg, None) for cfg in TRACE_CONFIGS] + [("leaf", cfg, None) for cfg in TRACE_CONFIGS]
    phases += [("short", cfg, None) for cfg in ACTOR_CONFIGS] + [("edge", cfg, None) for cfg in ACTOR_CONFIGS]
    for phase, cfg, seqs in phases:
        if phase == "short":
            seqs = _short_sequences(cfg, depth)
        elif phase == "edge":
            seqs = _edge_paths(cfg)
        checker, _ = _checker(cfg)
        for actions in seqs if seqs is not None else _leaf_paths(cfg):
            run = checker.replay(actions)
            replayed += 1
            if not run.ok:
                return clock.killed(f"{cfg}: {run.divergence.describe()}", checker.minimise(run), f"{replayed} paths")
            if clock.over():
                return clock.capped(f"{replayed} paths")
    return clock.survived(f"{replayed} paths (every sequence of <= {depth} calls, then every leaf; with the other "
                          "actors, every transition) conform", f"{replayed} paths")


def engine_random(budget: Budget) -> Detection:
    from conq.conformance.generate import derive_seed

    clock = Clock(budget)
    base, extra = budget.count(RANDOM_TRACES), budget.count(ACTOR_RANDOM_TRACES)
    traces = base + extra
    for i in range(traces):
        cfg = TRACE_CONFIGS[i % len(TRACE_CONFIGS)] if i < base else ACTOR_CONFIGS[(i - base) % len(ACTOR_CONFIGS)]
        checker, _ = _checker(cfg)
        run = checker.walk(derive_seed(0, i), 40)
        if not run.ok:
            return clock.killed(f"{cfg} trace {i}: {run.divergence.describe()}", checker.minimise(run), f"{i + 1} traces")
        if clock.over():
            return clock.capped(f"{i + 1} of {traces} traces")
    return clock.survived(f"{traces} random traces conform", f"{traces} traces")


def engine_hypothesis(budget: Budget) -> Detection:
    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    from conq.conformance.side_by_side import machine_for

    clock = Clock(budget)
    examples = budget.count(HYPOTHESIS_EXAMPLES)
    configs = TRACE_CONFIGS + ACTOR_CONFIGS
    for k, cfg in enumerate(configs):
        _, model = _checker(cfg)
        n = examples if cfg in TRACE_CONFIGS else max(1, examples // 3)
        try:
            run_state_machine_as_test(
                machine_for(model, _driver_cls()),
                settings=settings(max_examples=n, stateful_step_count=30, deadline=None, database=None,
                                  derandomize=True, suppress_health_check=list(HealthCheck)),
            )
        except AssertionError as e:
            return clock.killed(f"{cfg}: {str(e).splitlines()[0]}", getattr(e, "actions", []), f"{k + 1} configurations")
        if clock.over():
            return clock.capped(f"{k + 1} of {len(configs)} configurations")
    return clock.survived("no failing example", f"{examples} examples x {len(TRACE_CONFIGS)} configurations + "
                          f"{max(1, examples // 3)} x {len(ACTOR_CONFIGS)}")


def engine_stress(budget: Budget) -> Detection:
    import threading

    from conq.impl.consumer_lists.workload import ConsumerSpec, WorkloadError, run_workload

    clock = Clock(budget)
    per_publisher = budget.count(STRESS_MESSAGES)
    conns = [
        [ConsumerSpec(priority=10, credit_window=4), ConsumerSpec(priority=5)],
        [ConsumerSpec(priority=5, credit_window=2), ConsumerSpec(acquires=False)],
        [ConsumerSpec(priority=1), ConsumerSpec(priority=1, credit_window=1)],
    ]
    outcome: list[Detection] = []
    spent = f"{3 * per_publisher:,} messages"

    def run() -> None:
        try:
            # the workload's own timeouts are stall detectors (a stall is a finding), capped by the
            # safety cap; the verdict is "every message settled once, browsers saw all"
            run_workload(publishers=3, messages_per_publisher=per_publisher, connections=conns, io_threads=2,
                         flow_toggles=300, browse_phase_messages=50, seed=1, timeout=budget.max_seconds, stall_timeout=30.0)
            outcome.append(clock.survived(f"{spent}, all checks pass", spent))
        except WorkloadError as e:
            outcome.append(clock.killed(str(e).splitlines()[0], spent=spent))
        except Exception as e:  # a crash inside the implementation also kills the mutant
            outcome.append(clock.killed(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", spent=spent))

    # The workload bounds its own waits, but a deadlocked implementation can hold the very lock its
    # failure report needs: the run is watched from outside too, and a hang is a detection.
    watcher = threading.Thread(target=run, name="stress-engine", daemon=True)
    watcher.start()
    watcher.join(timeout=budget.max_seconds + 30.0)
    if watcher.is_alive():
        return clock.killed("the implementation hung (deadlock or livelock): the run never ended", spent=spent)
    return outcome[0]


def engine_schedules(budget: Budget) -> Detection:
    """Interleavings of the whole chain under the implementation's deterministic
    scheduler (``workload.explore_schedules``): the same workload checks as ``stress``,
    but every interleaving point -- each lock acquire and release, each thread step of
    the model (un-notify, find, acquire, deliver, set-desired halves, publisher
    notification) -- is decided by the scheduler.  Systematic first: every schedule with
    0, then 1, then 2 deviations from the default (non-preemptive) schedule over the
    small ``SYSTEMATIC_SHAPES``; then PCT seeds over ``schedule_shape``.  The budget is
    a count of schedules; a failure is minimised (delta debugging over its deviations)
    and its interleaving printed (``detail``, after the first line; ``evidence``: the
    minimised deviations as (thread, its point number, thread run instead, label))."""
    from conq.impl.consumer_lists.workload import explore_schedules

    clock = Clock(budget)
    systematic, pct = budget.count(SYSTEMATIC_SCHEDULES), budget.count(PCT_SCHEDULES)
    result = explore_schedules(systematic, pct, max_replays=SCHEDULE_MINIMISE_REPLAYS, stop=clock.over)
    spent = f"{result.explored} schedules"
    if result.failure is not None:
        f = result.failure
        return clock.killed(f.report(), [(d.thread, d.at, d.to, d.label) for d in f.schedule], spent)
    if result.stopped:
        return clock.capped(f"{result.explored} of {systematic + pct} schedules")
    return clock.survived(f"{result.describe()}: every check passes", spent)


def engine_pct(budget: Budget) -> Detection:
    """Probabilistic concurrency testing (``pct.explore_pct``): ``PCT_RUNS`` runs of the programs of
    ``pct.PROGRAMS`` in rotation, depths 1-3, every thread under the deterministic scheduler.  The
    detail of a kill names the program, its run (the seed) and depth, the failure, and the
    minimised schedule with its interleaving: the same on every machine and every run."""
    from .pct import explore_pct

    clock = Clock(budget)
    runs = budget.count(PCT_RUNS)
    result = explore_pct(runs, stop=clock.over)
    spent = f"{result.runs} runs"
    if result.failure is not None:
        f = result.failure
        evidence = [(d.thread, d.at, d.to, d.label) for d in f.minimised.schedule] if f.minimised else []
        return clock.killed(f.report(), evidence, spent)
    if result.stopped:
        return clock.capped(f"{result.runs} of {runs} runs")
    return clock.survived(f"{result.describe()}: every check passes", spent)


def engine_linearizability(budget: Budget) -> Detection:
    """Concurrent histories on real threads, checked against sequential
    specifications: the node list (append/remove/size, iteration's weak
    consistency) and the queue's message operations (enqueue/pull/release)."""
    from conq.conformance.linearizability import check_node_list, check_queue

    clock = Clock(budget)
    nr, qr = budget.count(LIN_NODE_ROUNDS), budget.count(LIN_QUEUE_ROUNDS)
    spent = f"{nr} node-list and {qr} queue rounds"
    problem = check_node_list(lambda: _nl.NodeList(scavenge_threshold=1), rounds=nr, seed=3) or check_queue(
        lambda: _q.Queue(record_events=False), rounds=qr, seed=5)
    if problem:
        return clock.killed(problem.splitlines()[0], spent=spent)
    return clock.survived(f"{spent} linearizable", spent)


#: messages of the all-actors stress run (``impl/consumer_lists/actors_workload.py``), ten threads
STRESS_ACTOR_MESSAGES = 20_000


def engine_stress_actors(budget: Budget) -> Detection:
    """The all-actors workload on real threads (``actors_workload.run_all_actors``: publishers,
    consumers of three priorities, housekeeping expiry, management deletes and un-holds, rejects,
    releases, both group policies, consumer churn and flow toggling): nothing lost, nothing acquired
    twice, no redelivery to a rejecter, group ownership, no stall.  Its stall detector (no progress
    for ``stall_timeout`` seconds with work pending) is a finding, as the ``stress`` engine's."""
    import threading

    from conq.impl.consumer_lists.actors_workload import run_all_actors

    clock = Clock(budget)
    n = budget.count(STRESS_ACTOR_MESSAGES)
    spent = f"{n:,} messages"
    outcome: list[Detection] = []

    def run() -> None:
        try:
            run_all_actors(n, threads=10, seed=1, stall_timeout=20.0, timeout=budget.max_seconds)
            outcome.append(clock.survived(f"{spent}, all checks pass", spent))
        except Exception as e:  # a failed check, or a crash inside the implementation
            text = str(e).splitlines()[0] if str(e) else ""
            outcome.append(clock.killed(f"{type(e).__name__}: {text[:300]}", spent=spent))

    watcher = threading.Thread(target=run, name="stress-actors-engine", daemon=True)
    watcher.start()
    watcher.join(timeout=budget.max_seconds + 30.0)
    if watcher.is_alive():
        return clock.killed("the implementation hung (deadlock or livelock): the run never ended", spent=spent)
    return outcome[0]


def engine_races(budget: Budget) -> Detection:
    """The other actors racing the consumers (``races.py``): every schedule with 0, then 1, then 2
    deviations of each scenario, fewest first, up to ``RACE_SCHEDULES`` schedules."""
    from .races import explore_races

    clock = Clock(budget)
    count = budget.count(RACE_SCHEDULES)
    result = explore_races(count, stop=clock.over)
    spent = f"{result.explored} schedules"
    if result.failure is not None:
        return clock.killed(result.failure, [(d.thread, d.at, d.to) for d in result.schedule], spent)
    if result.stopped:
        return clock.capped(f"{result.explored} of {count} schedules")
    return clock.survived(f"{result.describe()}: every check passes", spent)


def engine_thread_steps(budget: Budget) -> Detection:
    """The thread level (issue 17, ``thread_steps.py``): the reference queue's threads stepped one
    model step at a time under a checker-driven scheduler, ``THREAD_WALKS`` seeded walks per
    thread-level configuration, every step checked against the model's thread steps.  A mutant
    whose threads do not stop at the model's thread steps in the model's order cannot be stepped:
    that is a divergence (``thread_steps.NotDrivable``, a port failure of kind ``protocol``), killed
    with the step that showed it (issue 32: it used to survive as "not drivable")."""
    from conq.conformance.thread_level import mutant_engine

    from . import thread_steps

    return mutant_engine(thread_steps, budget, THREAD_WALKS, THREAD_LENGTH)


ENGINES = {
    "explorer": engine_explorer,
    "random": engine_random,
    "hypothesis": engine_hypothesis,
    "schedules": engine_schedules,
    "pct": engine_pct,
    "linearizability": engine_linearizability,
    "races": engine_races,
    "thread-steps": engine_thread_steps,
}
#: the real-thread, random-timing engines: throughput and soak runs, no longer bug finders (issue 32:
#: on the catalogue's interleaving bugs they kill next to nothing where ``pct`` and the systematic
#: engines kill them all, bench/cl_pct_vs_stress.py); kept for that comparison and for soak runs
SOAK_ENGINES = {
    "stress": engine_stress,
    "stress-actors": engine_stress_actors,
}

CATALOGUE = Catalogue("consumer-lists", MUTANTS, ENGINES)
#: the catalogue with the soak engines too (bench/cl_pct_vs_stress.py)
SOAK_CATALOGUE = Catalogue("consumer-lists", MUTANTS, {**ENGINES, **SOAK_ENGINES})


#: the consumer-lists kill matrix (see :func:`conq.conformance.mutation.run_catalog`)
run_catalog = CATALOGUE.run


__all__ = ["CATALOGUE", "ENGINES", "MUTANTS", "SOAK_CATALOGUE", "SOAK_ENGINES", "Budget", "Detection", "Mutant",
           "mutant_driver", "run_catalog"]
