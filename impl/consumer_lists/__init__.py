"""conq.impl.consumer_lists -- the reference implementation of Qpid Broker-J's consumer/queue coordination.

Production-style, concurrent code (not the model again; it never imports ``conq.model`` or
``conq.conformance``).  Modules, bottom up (scheduling is ``conq.impl.scheduling``, shared with the other systems):

* ``node_list``        -- the thread-safe node list (O(1) append / delete-by-entry / size, lazy
                          unlinking, weakly consistent iterators).
* ``consumer_manager`` -- the QCM: node states, the five lists, per-priority lists, guarded moves.
* ``queue``            -- the queue: message states, notification rules, ``deliver_single_message``,
                          credit, browsers, release/hold; the observation API (``Queue.snapshot``).
* ``housekeeping``     -- the housekeeping thread (TTL expiry: ``Queue.check_message_status``).
* ``actors_workload``  -- a checked workload with every actor of issue 16 on (deletes, expiry,
                          rejects, shared and assigned message groups, churn), for stress runs.
* ``delivery``         -- consumer -> target -> session -> connection, and the IO-thread pool (the
                          12 steps of the seed); the failure policy for delivery callbacks.
* ``workload``         -- a checked publish/consume workload over the whole chain (stress tests,
                          seeded exploration, fault injection, throughput and fault benchmarks).

Each module's docstring states where its rules come from and its concurrency argument (what each
lock or atomic step protects), written so that it holds without the GIL.

Step-by-step use (the conformance checker): create a ``queue.Queue()`` and call its operations from
one thread -- ``add_consumer``, ``enqueue``, ``set_flow``/``add_credit`` (which call
``set_notify_work_desired``), ``deliver_single_message``, ``release``, ``settle``, ``hold``/``unhold``,
``remove_consumer``, and the other actors' ``delete_entry``, ``check_message_status``, ``reject`` --
and compare ``snapshot()`` after each.  Every operation completes before it
returns; nothing runs in the background unless an ``IOThreadPool`` or a ``Housekeeping`` is started.
"""
