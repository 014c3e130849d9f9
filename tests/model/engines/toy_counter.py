"""A tiny model that proves the kernel, kept out of the product.

N clients each add one to a shared counter.  Non-atomic clients read, then
write what they read plus one (the classic lost update); atomic clients add
in one step.  With ``may_abort`` a client that has read may give up and start
again, which lets a fair scheduler loop forever without finishing.
"""

from __future__ import annotations

from dataclasses import dataclass

from conq.model.kernel import Model, always, always_step, int_range, leads_to, sometimes

IDLE, READ, DONE = 0, 1, 2


@dataclass(frozen=True)
class CounterConfig:
    clients: int = 2
    atomic: bool = False
    may_abort: bool = False


class CounterModel(Model):
    name = "toy-counter"
    Config = CounterConfig
    ACTIONS = {"add": ("client",), "read": ("client",), "write": ("client",), "abort": ("client",)}

    @classmethod
    def validate_config(cls, config):
        problems = super().validate_config(config)
        int_range(problems, config, "clients", 1, why="with no client nothing happens")
        return problems

    @classmethod
    def configs(cls):
        return {
            "racy": CounterConfig(),
            "atomic": CounterConfig(atomic=True),
            "aborting": CounterConfig(atomic=True, may_abort=True),
        }

    # state: (pcs, temps, counter)
    def init_states(self):
        n = self.config.clients
        return [((IDLE,) * n, (0,) * n, 0)]

    def actions(self, s):
        pcs, _, _ = s
        for i, pc in enumerate(pcs):
            if pc == IDLE:
                yield ("inc",) if False else (("add", i) if self.config.atomic else ("read", i))
            elif pc == READ:
                yield ("write", i)
                if self.config.may_abort:
                    yield ("abort", i)

    def step(self, s, a):
        pcs, temps, counter = s
        name, i = a
        if name == "add" and pcs[i] == IDLE:
            # an atomic client reads and writes in one step, passing through READ
            # only when it may abort
            if self.config.may_abort:
                return [("ok", (_set(pcs, i, READ), _set(temps, i, counter), counter))]
            return [(counter + 1, (_set(pcs, i, DONE), temps, counter + 1))]
        if name == "read" and pcs[i] == IDLE:
            return [(counter, (_set(pcs, i, READ), _set(temps, i, counter), counter))]
        if name == "write" and pcs[i] == READ:
            value = (counter if self.config.atomic else temps[i]) + 1
            return [(value, (_set(pcs, i, DONE), temps, value))]
        if name == "abort" and pcs[i] == READ:
            return [("aborted", (_set(pcs, i, IDLE), temps, counter))]
        return []

    def fair(self, action, observation):
        if action[0] == "abort":
            return None  # giving up is the environment's choice, never forced
        return ("client", action[1])

    def properties(self):
        n = self.config.clients
        return [
            always(
                "no-lost-update",
                "when every client is done, the counter equals the number of clients",
                lambda s: not all(pc == DONE for pc in s[0]) or s[2] == n,
                witness=lambda s: all(pc == DONE for pc in s[0]),
            ),
            always(
                "done-means-written",
                "once a client is done, the counter is at least one",
                lambda s: DONE not in s[0] or s[2] >= 1,
                witness=lambda s: DONE in s[0],
            ),
            always_step(
                "counter-monotonic",
                "the counter never decreases",
                lambda s, a, o, t: t[2] >= s[2],
                witness=lambda s, a, o, t: t[2] > s[2],
            ),
            sometimes("someone-done", "some client finishes", lambda s: DONE in s[0]),
            leads_to(
                "all-finish",
                "once a client starts, every client eventually finishes",
                lambda s: any(pc != IDLE for pc in s[0]),
                lambda s: all(pc == DONE for pc in s[0]),
                fairness="weak fairness per client for read/add/write; abort is never forced",
            ),
        ]

    def view(self, s):
        return {"pc": [["idle", "read", "done"][p] for p in s[0]], "tmp": list(s[1]), "counter": s[2]}

    def actors(self, action, observation):
        return (f"client{action[1]}", "counter")


def _set(t, i, v):
    return t[:i] + (v,) + t[i + 1 :]
