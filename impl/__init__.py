"""conq.impl -- the reference implementations, one package per system.

Production-style, concurrent code (not the models again; nothing here imports ``conq.model`` or
``conq.conformance``).

* ``scheduling``       -- shared by every system: real threads (``REAL``) or a seeded, replayable
                          ``DeterministicScheduler`` deciding every interleaving point.
* ``consumer_lists``   -- Qpid Broker-J's queue-side consumer manager and delivery chain
                          (seeds 000/002/003).
* ``ordered_consumption`` -- the RocketMQ thin client of seed 001 and the broker it talks to.
* ``recovery_deferral``   -- the odds-feed SDK's concurrent listener of seed 004.

Each module's docstring states where its rules come from and its concurrency argument (what each
lock or atomic step protects), written so that it holds without the GIL.
"""
