"""The consumer-lists model's other actors (issue 16): the housekeeping thread that deletes expired
entries (and management deletes), a consuming connection's IO thread that rejects an entry, and the
message-group managers that make an entry unavailable to every consumer but its group's owner.

Seeds 000/002, "Threading Model": the publishing part "might be invoked from different threads
(producing connection's IO-Thread, Housekeeping thread for held or TTLed messages, a consuming
connection's IO-Thread in case for message reject)"; "Interfaces Between Consumers and Queues": a
"previously unavailable (acquired, held, blocked by message grouping) message becomes available".
Upstream (apache/qpid-broker-j, ``broker-core/.../server/queue/``): ``AbstractQueue``
(``deleteEntry``, ``expireEntry``, ``checkMessageStatus``, ``requeue``, ``resetSubPointersForGroups``,
``unregisterConsumer``), ``QueueEntryImpl`` (``acquireOrSteal``, ``DelayedAcquisitionStateListener``,
``reject``, ``release``, ``postRelease``), ``DefinedGroupMessageGroupManager`` (shared groups) and
``AssignedConsumerMessageGroupManager`` (one consumer per group); ``AbstractConsumerTarget.send``
(``makeAcquisitionStealable``).

This is a mixin of :class:`~conq.model.consumer_lists.model.ConsumerListsModel`: it reads the
layout the model sets up (``REJ``, ``DP``, ``GOWN``, ``GCNT``, ``GRS``) and calls the
model's queue helpers (``_notify``, ``_notify_others``, ``_any_available``).  Every function here
is a no-op, or never called, when its actor is switched off, so the configurations without the new
actors have exactly the states they had before.

Simplifications (stated in spec/consumer-lists.md):

* TTL expiry and the deletion of the expired entry are one step: whichever thread first passes an
  expired entry (the housekeeping thread's ``checkMessageStatus``, a consumer's
  ``getNextAvailableEntry``, a ``notifyConsumer`` look) deletes it through the same ``deleteEntry``,
  and until then every consumer skips it exactly like a deleted one; only the thread differs.
* A shared group's ``_activeCount`` is the number of its entries whose acquisition the group's
  listener counted (a bit per entry, ``GCNT``): upstream can add one listener per ``assignMessage``
  call and so count an entry twice; the model counts it once.
* Upstream resets the consumers' pointers when a shared group is given up only if a non-owner
  skipped one of its entries (``Group._skippedEntries``, filled by every ``mightAssign`` that said
  no).  The model resets when an entry of the freed group is available: the same entries, read off
  the state instead of recorded by every look (which the z3 encoding could not follow walk by walk).
  An entry skipped and since taken or deleted makes upstream reset for nothing.  (An exact
  skipped-entry bookkeeping was explored too, before this simplification: no lost wake-up in
  groups-shared, expiry + shared groups or all-actors either.)  The reset notifies every registered
  acquiring consumer (the model has no read pointers: every consumer looks from the head, so every
  pointer "moves back") and runs as its own step, owed by the thread that freed the group (``GRS``),
  as a publisher's ``notifyConsumers`` is owed after an entry became available; upstream runs it
  inside the group manager's monitor.
"""

from __future__ import annotations

from .state import (
    ACQ,
    AVAILABLE,
    CF,
    DELETED,
    F_PC,
    F_SEEN,
    HELD,
    IDLE,
    START,
    GroupPolicy,
)


class OtherActors:
    """Steps and helpers of the housekeeping thread, reject and message groups."""

    # ------------------------------------------------------------------ layout
    def _setup_actors(self) -> None:
        cfg = self.config
        m = self.m
        self.grp = tuple(int(g) for g in cfg.groups) if cfg.groups else (-1,) * m
        self.G = (max(self.grp) + 1) if cfg.groups else 0
        self.shared = bool(cfg.groups) and cfg.group_policy is GroupPolicy.SHARED
        self.assigned = bool(cfg.groups) and cfg.group_policy is GroupPolicy.ASSIGNED
        x = self.BUD + 1
        self.REJ = self.DP = self.GOWN = self.GCNT = self.GRS = None
        if cfg.reject:
            self.REJ = x  # per message: the consumers that rejected it (bit mask)
            x += m
        if cfg.expiry:
            self.DP = x  # the messages a delete waits for (DelayedAcquisitionStateListener), bit mask
            x += 1
        if cfg.groups:
            self.GOWN = x  # per group: its consumer + 1 (0: none)
            self.GCNT = x + self.G  # the entries whose acquisition the shared group counted (bit mask)
            self.GRS = x + self.G + 1  # a pointer reset (resetSubPointersForGroups) is owed
            x += self.G + 2
        self.END = x
        #: per group, the bit mask of its entries
        self.gmask = tuple(sum(1 << j for j in range(m) if self.grp[j] == g) for g in range(self.G))

    def _actor_fields(self) -> list:
        return [0] * (self.END - self.BUD - 1)

    # ------------------------------------------------------------------ reject
    def _interest(self, l, c, j) -> bool:
        """``QueueConsumerImpl.hasInterest``: not rejected by ``c`` (``QueueEntryImpl.isRejectedBy``);
        a browser has not seen it yet."""
        if self.REJ is not None and (l[self.REJ + j] >> c) & 1:
            return False
        return self.acq[c] or not (l[c * CF + F_SEEN] >> j) & 1

    def _reject(self, s, c, j):
        """A consuming connection's IO thread rejects the entry its consumer holds (seeds 000/002
        Threading Model; upstream AMQChannel basic.reject / ConsumerTarget_1_0 Modified
        undeliverable-here: ``QueueEntryImpl.reject(consumer)`` then ``release(consumer)``): the
        entry is available again for everybody but ``c``, and a notification is owed for it."""
        l = list(s)
        budget = s[self.BUD]
        l[self.BUD] -= budget > 0
        l[self.REJ + j] |= 1 << c
        self._requeue(l, j)
        return (("reject", c, j), None, tuple(l))

    def _can_reject(self, s, c, j) -> bool:
        b = c * CF
        return (self.REJ is not None and s[self.BUD] != 0 and s[self.MB + 2 * j] == ACQ + c
                and (s[self.L_ALL] >> c) & 1 and s[b + F_PC] in (IDLE, START))

    def _requeue(self, l, j) -> None:
        """``QueueEntryImpl.release`` -> ``postRelease``: the entry is available again, the releasing
        thread owes ``requeue`` / ``notifyConsumers`` for it, and the group listener counts it out
        (``Group.subtract(entry, released=true)``)."""
        l[self.MB + 2 * j] = AVAILABLE
        l[self.MB + 2 * j + 1] = 1
        self._group_left(l, j, True)

    # ------------------------------------------------------------------ housekeeping: deleteEntry
    def _stealable(self, s, j) -> bool:
        """A consumer's acquisition is stealable once it was sent (``AbstractConsumerTarget.send`` ->
        ``makeAcquisitionStealable``); between the acquire and the send it is not."""
        st = s[self.MB + 2 * j]
        return st >= ACQ and s[(st - ACQ) * CF + F_PC] != self.GOT + j

    def _delete_entry(self, s, j):
        """``AbstractQueue.deleteEntry`` on the housekeeping thread (``checkMessageStatus`` ->
        ``expireEntry`` for an expired entry) or a management thread (delete, move):
        ``QueueEntryImpl.acquireOrSteal`` acquires an available entry as a non-consumer, or steals a
        consumer's stealable acquisition; a held entry or an unsent acquisition cannot be taken now,
        so a ``DelayedAcquisitionStateListener`` waits for its next state change."""
        l = list(s)
        notified: list[int] = []
        st = s[self.MB + 2 * j]
        if st == AVAILABLE or self._stealable(s, j):
            self._dequeue_entry(l, j, notified)
        else:
            l[self.DP] |= 1 << j
        return (("delete_entry", j), tuple(notified), tuple(l))

    def _can_delete(self, s, j) -> bool:
        st = s[self.MB + 2 * j]
        return not (s[self.DP] >> j) & 1 and (st in (AVAILABLE, HELD) or st >= ACQ)

    def _delayed_acquisition(self, s, j):
        """``DelayedAcquisitionStateListener.stateChanged``: the entry a delete waits for changed
        state (released, un-held, or sent and so stealable): ``acquireOrSteal`` now succeeds and the
        delete completes."""
        l = list(s)
        notified: list[int] = []
        l[self.DP] &= ~(1 << j)
        self._dequeue_entry(l, j, notified)
        return (("delayed_acquisition", j), tuple(notified), tuple(l))

    def _can_complete_delete(self, s, j) -> bool:
        return bool((s[self.DP] >> j) & 1) and (s[self.MB + 2 * j] == AVAILABLE or self._stealable(s, j))

    def _dequeue_entry(self, l, j, notified) -> None:
        """The entry, taken by a non-consumer, is dequeued and deleted (``dequeueEntry`` ->
        ``QueueEntryImpl.delete``); a stolen acquisition leaves its group
        (``Group.subtract(entry, released=false)``).  Reference: the deleting thread then notifies one
        interested consumer while messages are available (``notifyOtherConsumers(null)``); upstream
        notifies nobody."""
        st = l[self.MB + 2 * j]
        l[self.MB + 2 * j] = DELETED
        if st >= ACQ:
            self._group_left(l, j, False)
        if self.config.delete_notifies and self._any_available(l):
            self._notify_others(l, -1, notified)

    # ------------------------------------------------------------------ message groups
    def _group_owner(self, l, g) -> int:
        return l[self.GOWN + g] - 1

    def _group_counted(self, l, g) -> bool:
        return bool(l[self.GCNT] & self.gmask[g])

    def _group_valid(self, l, g) -> bool:
        """``DefinedGroupMessageGroupManager.Group.isValid``: it has a consumer, and that consumer is
        open or still holds a counted entry.  An assigned group (STANDARD) is valid while assigned."""
        own = self._group_owner(l, g)
        if own < 0:
            return False
        if self.shared:
            return bool((l[self.L_ALL] >> own) & 1) or self._group_counted(l, g)
        return True

    def _might_assign(self, l, c, j) -> bool:
        """``MessageGroupManager.mightAssign`` (``AbstractQueue.mightAssign``: always for a browser
        and an entry with no group): the entry's group has no (valid) owner or is ``c``'s."""
        g = self.grp[j]
        if g < 0 or not self.acq[c]:
            return True
        return self._group_owner(l, g) == c or not self._group_valid(l, g)

    def _accept_message(self, l, c, j) -> bool:
        """``MessageGroupManager.acceptMessage`` (under the manager's monitor): ``assignMessage`` then
        the entry's acquire CAS.  A group without a valid owner is given to ``c``; a group owned by
        another consumer refuses (and, shared, remembers the entry as skipped).  Reference: a group
        given to ``c`` here is taken back when the CAS fails; upstream keeps it.  Reference: a consumer
        removed while it pulled is refused; upstream gives it the group."""
        g = self.grp[j]
        created = False
        if self.config.group_refuses_closed and not (l[self.L_ALL] >> c) & 1:
            return False  # no queue context: the consumer was closed while it pulled
        if g >= 0:
            own = self._group_owner(l, g)
            if own != c and not self._group_valid(l, g):
                l[self.GOWN + g] = c + 1
                created = True
            elif own != c:
                return False
        ok = l[self.MB + 2 * j] == AVAILABLE or (not self.config.acquire_cas and l[self.MB + 2 * j] >= ACQ)
        if ok:
            l[self.MB + 2 * j] = ACQ + c
            if g >= 0 and self.shared and self._group_valid(l, g):
                # GroupStateChangeListener: into the group consumer's acquired state -> Group.add
                l[self.GCNT] |= 1 << j
        elif created and self.config.group_assign_with_acquire:
            l[self.GOWN + g] = 0
        return ok

    def _group_left(self, l, j, released) -> None:
        """``GroupStateChangeListener``: an entry the shared group counted leaves its consumer's
        acquired state (released, or dequeued): ``Group.subtract``.  When the group's last counted
        entry goes, the group is removed and, if an entry of it is available (upstream: if a
        non-owner skipped one), the pointers are reset (``resetSubPointersForGroups``), owed as a
        step.  A released entry counts as available here: upstream's release itself resets every
        consumer's pointer (``requeue`` -> ``resetSubPointers``), which the model's owed
        ``notifyConsumers`` narrows to one acquiring consumer.  ``released`` is kept for the reader:
        upstream forgets a dequeued entry from the skipped ones; the model reads availability off the
        state, after every entry the step releases was released."""
        g = self.grp[j]
        if not self.shared or g < 0 or not (l[self.GCNT] >> j) & 1:
            return
        l[self.GCNT] &= ~(1 << j)
        if not self._group_counted(l, g):
            l[self.GOWN + g] = 0
            if self._group_available(l, g):
                l[self.GRS] = 1

    def _group_available(self, l, g) -> bool:
        """An entry of group ``g`` is available."""
        return any(l[self.MB + 2 * k] == AVAILABLE for k in range(self.m) if self.grp[k] == g)

    def _unregister_groups(self, l, c) -> None:
        """``AbstractQueue.unregisterConsumer`` -> ``resetSubPointersForGroups(consumer)``: the
        earliest available entry of a group of ``c`` (``findEarliestAssignedAvailableEntry``), then
        ``clearAssignments(c)`` (STANDARD only; shared groups are given up by their listener), then a
        pointer reset from that entry if there is one."""
        if not self.G:
            return
        found = any(
            l[self.MB + 2 * j] == AVAILABLE and self.grp[j] >= 0 and self._group_owner(l, self.grp[j]) == c
            for j in range(self.m)
        )
        if self.assigned:
            for g in range(self.G):
                if self._group_owner(l, g) == c:
                    l[self.GOWN + g] = 0
        if found:
            l[self.GRS] = 1

    def _reset_sub_pointers_for_groups(self, s):
        """``AbstractQueue.resetSubPointersForGroups(entry)`` -> ``resetSubPointers(entry, true)``, owed
        by the thread that freed a group: every registered consumer that sees requeues (the acquiring
        ones) is moved back (``updateSubRequeueEntry``) and notified (``notifyConsumer``)."""
        l = list(s)
        l[self.GRS] = 0
        notified: list[int] = []
        for c in range(self.n):
            if self.acq[c] and (l[self.L_ALL] >> c) & 1:
                self._notify(l, c, notified)
        return (("reset_sub_pointers_for_groups",), tuple(notified), tuple(l))

    # ------------------------------------------------------------------ successors
    def _actor_successors(self, s, out) -> bool:
        """The new actors' steps, appended to ``out``; True when one of them is fair (owed)."""
        fair = False
        if self.GRS is not None and s[self.GRS]:
            fair = True
            out.append(self._reset_sub_pointers_for_groups(s))
        if self.DP is not None:
            for j in range(self.m):
                if self._can_complete_delete(s, j):
                    fair = True
                    out.append(self._delayed_acquisition(s, j))
            for j in range(self.m):
                if self._can_delete(s, j):
                    out.append(self._delete_entry(s, j))
        if self.REJ is not None:
            for c in range(self.n):
                for j in range(self.m):
                    if self._can_reject(s, c, j):
                        out.append(self._reject(s, c, j))
        return fair

    def _actor_view(self, s) -> dict:
        out: dict = {}
        if self.REJ is not None:
            out["rejected_by"] = [[c for c in range(self.n) if (s[self.REJ + j] >> c) & 1] for j in range(self.m)]
        if self.DP is not None:
            out["delete_waiting"] = [j for j in range(self.m) if (s[self.DP] >> j) & 1]
        if self.G:
            out["groups"] = [
                {
                    "group": g,
                    "messages": [j for j in range(self.m) if self.grp[j] == g],
                    "owner": self._group_owner(s, g) if s[self.GOWN + g] else None,
                    "counted": [j for j in range(self.m) if self.grp[j] == g and (s[self.GCNT] >> j) & 1],
                }
                for g in range(self.G)
            ]
            out["group_reset_owed"] = bool(s[self.GRS])
        return out
