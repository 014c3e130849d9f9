"""A small real implementation of the toy counter, and a driver for it, to
prove the conformance machinery without the product's models.

``CounterDriver`` follows the racy toy model exactly; ``AtomicWriteDriver``
is a plausible bug (writes add to the current counter instead of writing what
was read), which the checker must catch and minimise.
"""

from __future__ import annotations

import threading

from conq.conformance.adapters import ActionRejected


class Counter:
    def __init__(self, clients: int):
        self.value = 0
        self.lock = threading.Lock()
        self.phase = ["idle"] * clients
        self.temp = [0] * clients


class CounterDriver:
    def __init__(self, config: dict, seed: int):
        self.c = Counter(config["clients"])

    def do(self, action):
        name, i = action
        c = self.c
        if name == "read":
            if c.phase[i] != "idle":
                raise ActionRejected(f"client {i} is {c.phase[i]}")
            with c.lock:
                c.temp[i] = c.value
            c.phase[i] = "read"
            return c.temp[i]
        if name == "write":
            if c.phase[i] != "read":
                raise ActionRejected(f"client {i} is {c.phase[i]}")
            with c.lock:
                c.value = self.written(i)
            c.phase[i] = "done"
            return c.value
        raise ValueError(f"unknown action {name}")

    def written(self, i):
        return self.c.temp[i] + 1

    def snapshot(self):
        return {"pc": list(self.c.phase), "tmp": list(self.c.temp), "counter": self.c.value}


class AddDriver(CounterDriver):
    """The atomic configuration: one ``add`` per client."""

    def do(self, action):
        name, i = action
        if name != "add":
            return super().do(action)
        c = self.c
        if c.phase[i] != "idle":
            raise ActionRejected(f"client {i} is {c.phase[i]}")
        with c.lock:
            c.value += 1
            value = c.value
        c.phase[i] = "done"
        return value


class AtomicWriteDriver(CounterDriver):
    def written(self, i):
        return self.c.value + 1


class ForgetfulDriver(CounterDriver):
    """Reads report the right value but remember 0: invisible until the write."""

    def do(self, action):
        obs = super().do(action)
        if action[0] == "read":
            self.c.temp[action[1]] = 0
        return obs


class CrashingDriver(CounterDriver):
    def do(self, action):
        if action[0] == "write":
            raise RuntimeError("boom")
        return super().do(action)


class HangingDriver(CounterDriver):
    def do(self, action):
        if action[0] == "write":
            import time

            time.sleep(60)
        return super().do(action)
