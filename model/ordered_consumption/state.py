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

# -- push consumer: message record (srv, delivered, cli, in_cache, consumed) -----
C_NONE, C_CACHED, C_CONSUMING, C_ACKING, C_CIDING, C_DLQING = 0, 1, 2, 3, 4, 5
CLI_NAMES = ("-", "cached", "consuming", "acking", "changing-invisible", "dead-lettering")
IN_CONSUMPTION = (C_CONSUMING, C_ACKING, C_CIDING, C_DLQING)
# process queue record (waiting, notified, locked, worker)
W_IDLE, W_TAKE, W_BUSY, W_UNLOCK = 0, 1, 2, 3
WORKER_NAMES = ("idle", "take", "busy", "unlock")

# -- simple consumer: message record (srv, delivered, held); call (op, m, requests)
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
    # faults (mutants), never upstream behaviour:
    ignore_backoff: bool = False  # a throttled send retried at once
    fifo_rotates: bool = False  # a FIFO message rotated to the next queue like a normal one
    skip_type_check: bool = False  # the message type is not checked before sending
    # -- push / simple consumer
    msg_queue: tuple = (0, 0, 1)  # queue of each message, in send order (offset order per queue)
    msg_size: tuple = (1, 2, 1)  # body size of each message (for the byte threshold)
    cache_messages: int = 4  # maxCacheMessageCount, split over the process queues
    cache_bytes: int = 4  # maxCacheMessageSizeInBytes, split over the process queues
    server_batch: int = 2  # the most messages one receive returns
    max_attempts: int = 2  # max delivery attempts (server DLQ) / max consumptions (FIFO, client DLQ)
    erase_after_settle: bool = False  # upstream: a message leaves the cache only once settled
    settle_retry: bool = False  # upstream: standard ack / change-invisible retried until OK
    client_lock: bool = True  # seed: FIFO dispatcher locks the process queue
    server_gate: bool = False  # upstream: server withholds a FIFO queue's next message until settled
    dlq_when_exceeds: bool = False  # seed, read literally: DLQ once the count *exceeds* the maximum
    # faults (mutants):
    ignore_bytes: bool = False  # the receive loop checks only the message-count threshold
    unlock_signals: bool = True  # False: unlocking does not signal the dispatcher
    standard_client_dlq: bool = False  # standard mode dead-letters on the client
    simple_retry: bool = False  # the simple consumer retries a failed request internally
    # -- simple consumer
    simple_threads: int = 2  # application threads calling the simple consumer concurrently

    def roles(self) -> tuple[int, ...]:
        flags = (self.producer, self.push_standard, self.push_fifo, self.simple)
        return tuple(r for r, on in enumerate(flags) if on)


def _set(t: tuple, i: int, v: Any) -> tuple:
    return t[:i] + (v,) + t[i + 1 :]
