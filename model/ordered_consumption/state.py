"""The ordered-consumption model's vocabulary: roles, phases, server and client message states,
the configuration record.  Shared by the model, its properties and its z3 encoding
(one module all three import, so none imports another in a circle).
"""

from __future__ import annotations


from dataclasses import dataclass
from typing import Any


# -- roles (state[0]) ----------------------------------------------------------
PRODUCER, STANDARD, FIFO, SIMPLE = 0, 1, 2, 3
ROLE_NAMES = ("producer", "push-standard", "push-fifo", "simple")

# -- producer -------------------------------------------------------------------
# state: (PRODUCER, phase, mtype, mask, group, sent, queue, backoff, elapsed, result)
P_ROUTE, P_PICK, P_SEND, P_WAIT, P_DONE = 0, 1, 2, 3, 4
P_PHASES = ("fetch-route", "pick-queue", "send", "throttled-wait", "done")
NORMAL, FIFO_MSG, TXN = 0, 1, 2
MTYPES = ("normal", "fifo", "transactional")
R_NONE, R_OK, R_FAILED = 0, 1, 2
RESULTS = (None, "sent", "failed")

# -- server side of a message ------------------------------------------------------
S_READY, S_INVIS, S_ACKED, S_DLQ_SRV, S_DLQ_CLI = 0, 1, 2, 3, 4
SRV_NAMES = ("ready", "invisible", "acked", "dlq-by-server", "dlq-by-client")
SETTLED = (S_ACKED, S_DLQ_SRV, S_DLQ_CLI)

# -- push consumer: message record ------------------------------------------------
# (srv, delivered, cli, in_cache, consumed, copy, pending, memo, old, ok_on, total):
#   srv, delivered  the server's status of the message and its delivery count;
#   cli             the client's (oldest) copy: cached, in consumption, being settled;
#   in_cache        that copy counts against its process queue's cache;
#   consumed        local consumptions of that copy (FIFO re-consumes locally);
#   copy            the delivery attempt that copy was received with: its receipt handle is
#                   valid only while srv is invisible and copy == delivered (0: superseded by its
#                   own change of invisible duration);
#   pending         a newer delivery of the message, cached behind the copy still in consumption
#                   (its delivery attempt; 0: none);
#   memo            FIFO: the outcome (ack / DLQ) decided for a delivery whose settle the server
#                   rejected, used to settle the redelivery without consuming it again;
#   old             FIFO: the copy belongs to a process queue a rebalance dropped (its worker
#                   finishes, the queue's new process queue has its own lock);
#   ok_on, total    ghosts: the delivery of the live copy on which the listener succeeded (kept
#                   while that copy lives: a copy received later comes from a later delivery), and
#                   (FIFO) how many times the listener consumed the message in all.
C_NONE, C_CACHED, C_CONSUMING, C_ACKING, C_CIDING, C_DLQING, C_DELAY = 0, 1, 2, 3, 4, 5, 6
CLI_NAMES = ("-", "cached", "consuming", "acking", "changing-invisible", "dead-lettering", "retry-delay")
IN_CONSUMPTION = (C_CONSUMING, C_ACKING, C_CIDING, C_DLQING, C_DELAY)
M_NONE, M_ACK, M_DLQ = 0, 1, 2
MEMO_NAMES = (None, "ack", "dlq")
# process queue record (waiting, notified, locked, worker, assigned)
W_IDLE, W_TAKE, W_BUSY, W_UNLOCK = 0, 1, 2, 3
WORKER_NAMES = ("idle", "take", "busy", "unlock")

# -- simple consumer: message record (srv, delivered, held); call (op, m, requests)
# held: the application holds no copy, a copy with a valid receipt handle, or a stale one
H_NONE, H_VALID, H_STALE = 0, 1, 2
HELD_NAMES = (None, "valid", "stale")
OP_NONE, OP_RECEIVE, OP_ACK, OP_CID = 0, 1, 2, 3
OP_NAMES = (None, "receive", "ack", "change-invisible")


@dataclass(frozen=True)
class OCConfig:
    # which role models are explored (disjoint union of their state spaces)
    producer: bool = True
    push_standard: bool = True
    push_fifo: bool = True
    simple: bool = True
    # -- shared bounds
    queues: int = 2  # message queues of the topic (= process queues of a push consumer)
    # -- producer (REFERENCE §2: maxAttempts default 3)
    max_send_attempts: int = 3
    backoffs: tuple = (1, 2)  # back-offs (ticks) a throttling server may ask for
    txn_retries: bool = False  # upstream since 2024: a transactional send retries like the rest
    # upstream Python client 5.1.2 (producer.py __check_send_retry_condition): a throttled answer
    # ends the send, against seed 001 特别地 (throttled -> retry after the server's back-off)
    throttle_ends_send: bool = False
    # faults (mutants), never upstream behaviour:
    ignore_backoff: bool = False  # a throttled send retried at once
    fifo_rotates: bool = False  # a FIFO message rotated to the next queue like a normal one
    skip_type_check: bool = False  # the message type is not checked before sending
    # -- push / simple consumer
    msg_queue: tuple = (0, 0)  # queue of each message, in send order (offset order per queue)
    msg_size: tuple = (1, 2)  # body size of each message (for the byte threshold)
    cache_messages: int = 4  # maxCacheMessageCount, split over the process queues
    cache_bytes: int = 4  # maxCacheMessageSizeInBytes, split over the process queues
    server_batch: int = 2  # the most messages one receive returns
    max_attempts: int = 2  # max delivery attempts (server DLQ) / max consumptions (FIFO, client DLQ)
    erase_after_settle: bool = False  # upstream: a message leaves the cache only once settled
    settle_retry: bool = False  # upstream: standard ack / change-invisible retried until OK
    client_lock: bool = True  # seed: FIFO dispatcher locks the process queue
    dlq_when_exceeds: bool = False  # seed, read literally: DLQ once the count *exceeds* the maximum
    # faults (mutants):
    ignore_bytes: bool = False  # the receive loop checks only the message-count threshold
    unlock_signals: bool = True  # False: unlocking does not signal the dispatcher
    standard_client_dlq: bool = False  # standard mode dead-letters on the client
    simple_retry: bool = False  # the simple consumer retries a failed request internally
    simple_any_queue: bool = False  # each receive asks any queue (Python client 5.1.2), not round-robin
    # -- simple consumer
    simple_threads: int = 2  # application threads calling the simple consumer concurrently
    # -- several push consumers (clients) in one consumer group (issue 19, PF2): each has its own
    # process queues (seed 001: one process queue per message queue, per client) and its own copies;
    # the broker's per-group state -- visibility, delivery counts, the FIFO gate, outcomes -- is one
    # for the group (impl/ordered_consumption/broker.py ``_gq``: one ``_GQ`` per queue and group, not
    # per client).  With more than one, a push state is (role, server, clients, assignment stable)
    # (model.py, "several push consumers"; one client: (role, msgs, pqs, assignment stable)) and a push
    # action names its consumer: ``(c, p)`` / ``(c, m)``.
    consumers: int = 1
    # the broker's assignment of queues to the group's clients (broker.py ``query_assignment``):
    # False "shared", every client every queue (RocketMQ 5 pop; the upstream workloads' groups);
    # True "exclusive", queue q to client q mod consumers (round-robin over the clients)
    exclusive_assignment: bool = False
    # -- what the broker can do besides answering OK (impl/ordered_consumption/broker.py, faults.py);
    # each on in the reference, off reproduces the seed's assumptions
    expiry_while_held: bool = True  # invisible time runs out while the client holds the message
    server_faults: bool = True  # lost answers, throttling, BAD_REQUEST, failed receives
    rebalance: bool = True  # a message queue taken away (process queue dropped) and given back
    retry_delay: bool = True  # FIFO: the retry policy's delay before a local re-consumption
    answer_codes: bool = False  # one outcome per status code (same states, more transitions)
    server_gate: bool = True  # the server withholds a FIFO queue's next message until settled
    # -- the client's answer to a non-retriable settle answer (seed 001 FIFO steps 6 and 8)
    settle_until_success: bool = False  # seed, literally: repeat ack / DLQ even after a non-retriable answer
    remember_outcome: bool = True  # FIFO: a rejected settle's outcome settles the redelivery
    memo_survives_drop: bool = True  # the remembered outcome outlives a dropped process queue

    def roles(self) -> tuple[int, ...]:
        flags = (self.producer, self.push_standard, self.push_fifo, self.simple)
        return tuple(r for r, on in enumerate(flags) if on)


def _set(t: tuple, i: int, v: Any) -> tuple:
    return t[:i] + (v,) + t[i + 1 :]
