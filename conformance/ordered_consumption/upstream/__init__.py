"""conq.conformance.ordered_consumption.upstream -- the real, unmodified RocketMQ Python client (issue 19).

The project's broker serves the RocketMQ 5 gRPC API (``conq.impl.ordered_consumption.grpc_front``);
the pinned ``rocketmq-python-client`` runs the workloads against it in a worker process; every RPC,
answer and listener call is recorded as a conq trace and held to the ordered-consumption claims.

* ``workloads`` -- what the broker holds and what the clients do (named workloads, fault rates).
* ``recorder``  -- the servicer wrapper that logs every RPC and answer; the trace writer.
* ``worker``    -- the child process running the client (and the wrapped ``MessageListener``).
* ``runner``    -- one run (broker, face, worker, recorder), the end-of-run condition, the checks.
* ``campaign``  -- several seeds, one report (``conq upstream rocketmq-python``).
"""
