"""A z3 encoding of the toy counter, for any number of clients: proves the
symbolic engines in tests, like the toy model proves the explorer."""

from __future__ import annotations

from dataclasses import dataclass

import z3

from conq.model.engines.symbolic import Aux, Encoding, SymAction

IDLE, READ, DONE = 0, 1, 2
I = z3.IntSort()


@dataclass
class S:
    pc: z3.ArrayRef
    tmp: z3.ArrayRef
    counter: z3.ArithRef
    n: z3.ArithRef


class CounterEncoding(Encoding):
    model_name = "toy-counter"
    strengthening = {"done-means-written": ["non-negative"]}
    bounded_only = {}

    def __init__(self, atomic: bool = False):
        self.atomic = atomic

    def fresh(self, tag):
        return S(z3.Array(f"pc{tag}", I, I), z3.Array(f"tmp{tag}", I, I), z3.Int(f"counter{tag}"), z3.Int(f"n{tag}"))

    def _in(self, s, i):
        return z3.And(0 <= i, i < s.n)

    def bounds(self, model):
        return {"client": model.config.clients}

    def init(self, s):
        return z3.And(s.n >= 1, s.counter == 0, self.each("client", s.n, lambda i: z3.And(s.pc[i] == IDLE, s.tmp[i] == 0)))

    def well_formed(self, s):
        return s.n >= 1

    def actions(self):
        def read(s, t, i):
            return z3.And(self._in(s, i), s.pc[i] == IDLE, t.pc == z3.Store(s.pc, i, READ),
                          t.tmp == z3.Store(s.tmp, i, s.counter), t.counter == s.counter, t.n == s.n)

        def write(s, t, i):
            return z3.And(self._in(s, i), s.pc[i] == READ, t.pc == z3.Store(s.pc, i, DONE), t.tmp == s.tmp,
                          t.counter == s.tmp[i] + 1, t.n == s.n)

        def add(s, t, i):
            return z3.And(self._in(s, i), s.pc[i] == IDLE, t.pc == z3.Store(s.pc, i, DONE), t.tmp == s.tmp,
                          t.counter == s.counter + 1, t.n == s.n)

        if self.atomic:
            return [SymAction("add", [("i", I)], add)]
        return [SymAction("read", [("i", I)], read), SymAction("write", [("i", I)], write)]

    def invariants(self):
        def all_done(s):
            return self.each("client", s.n, lambda i: s.pc[i] == DONE)

        def some_done(s):
            return self.some("client", s.n, lambda i: s.pc[i] == DONE)

        return {
            "no-lost-update": lambda s: z3.Implies(all_done(s), s.counter == s.n),
            "done-means-written": lambda s: z3.Implies(some_done(s), s.counter >= 1),
        }

    def auxiliaries(self):
        return [Aux("non-negative", "the counter and every value read are non-negative",
                    lambda s: z3.And(s.counter >= 0, self.each("client", s.n, lambda i: s.tmp[i] >= 0)))]

    # -- concrete instances ---------------------------------------------------------------
    def bounded(self, s, model):
        return s.n == model.config.clients

    def encode(self, s, state, model):
        pcs, tmps, counter = state
        return z3.And([s.n == len(pcs), s.counter == counter]
                      + [s.pc[k] == v for k, v in enumerate(pcs)] + [s.tmp[k] == v for k, v in enumerate(tmps)])

    def decode(self, m, s, model):
        n = model.config.clients
        ev = lambda e: m.eval(e, model_completion=True).as_long()
        return (tuple(ev(s.pc[k]) for k in range(n)), tuple(ev(s.tmp[k]) for k in range(n)), ev(s.counter))

    def action_args(self, action, model):
        return action[0], [z3.IntVal(action[1])]

    def concrete_actions(self, model):
        names = ["add"] if self.atomic else ["read", "write"]
        return [(a, i) for a in names for i in range(model.config.clients)]

    def readable(self, m, s):
        n = m.eval(s.n, model_completion=True).as_long()
        ev = lambda e: m.eval(e, model_completion=True).as_long()
        n_show = max(0, min(n, 4))
        return {"n": n, "counter": ev(s.counter), "pc": [ev(s.pc[k]) for k in range(n_show)], "tmp": [ev(s.tmp[k]) for k in range(n_show)]}
