"""How close a replay campaign came to exhaustive, when nobody can enumerate the graph.

The Spark replay (:mod:`conq.conformance.spark_replay`) records the stable fingerprint
(:func:`conq.model.engines.fingerprint.fingerprint`, the same in every process) of every model
state its traces visit and of every transition they take, and for each one the number of
*sampling units* in which it was met.  From those incidence counts this module gives

* the number of distinct states seen and its growth with the number of traces (at powers of two);
* an estimate of the states never seen, with the bias-corrected **Chao2** species-richness
  estimator and its log-normal confidence interval (Chao 1987; Chao and Colwell 2017, "Thirty years
  of progeny from Chao's inequality", SORT 41(1) 3-54; formulas as in Chao's SpadeR package);
* which kinds of states stayed rare (states grouped by the set of action names they enable).

Why Chao2 (incidence) and not Chao1 (abundance).  Chao1 reads the number of *visits* to each state
as independent draws of individuals from one population.  Visits are not independent: a walk that
enters a region of the state space revisits its states along its own path, and the
coverage-guided generator steers later walks back to rarely visited states on purpose.  So the
visit counts of one walk are clustered, and singletons/doubletons of visit counts say little about
what no walk reached.  The incidence model needs only that the *sampling units* are independent and
identically distributed, and records per unit whether a state was met (detection/non-detection):

* ``--mode random``: a unit is one trace.  Trace ``i`` is a seeded uniform random walk whose seed
  is a hash of ``(root seed, i)``: traces are independent draws of one distribution.
* ``--mode coverage``: a unit is one *block* of :data:`~conq.conformance.spark_replay.BLOCK`
  traces.  Inside a block the generator remembers what the block has seen (so its traces are
  dependent by design); blocks start with empty memories from independent seeds, so blocks are
  the independent draws.  (The last block may be shorter when the trace count is not a multiple
  of the block size: a slight departure from "identically distributed", negligible for many blocks.)
* ``--mode exhaustive``: prefixes are enumerated, not sampled; the estimate is computed per trace
  but is indicative only (the report says so).

Chao2 is a lower bound of the expected richness in the presence of heterogeneity (unequal
detection probabilities); it is nearly unbiased when the unseen states are about as hard to reach
as the states seen once or twice.  States no walk of the configured length can reach at all
(deeper than ``--length``) are outside the population the campaign samples from: the estimate is
of the states reachable by such walks.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any, Iterable, Mapping

__all__ = [
    "Estimate", "chao2", "frequency_counts", "growth_at_powers_of_two", "state_class", "sample_unit",
    "unit_of", "rare_classes",
]


@dataclass(frozen=True)
class Estimate:
    """Chao2 estimate of how many distinct items (states, transitions) the sampled population holds."""

    observed: int  #: distinct items seen (S_obs)
    units: int  #: sampling units (m)
    q1: int  #: items seen in exactly one unit (uniques)
    q2: int  #: items seen in exactly two units (duplicates)
    estimate: float  #: bias-corrected Chao2: S_obs + (m-1)/m * Q1(Q1-1) / (2(Q2+1))
    se: float  #: standard error of the estimate
    low: float  #: lower bound of the confidence interval (never below S_obs)
    high: float  #: upper bound of the confidence interval
    conf: float = 0.95
    #: estimated sample coverage (Chao and Jost 2012, incidence form): the share of what a further
    #: unit would meet that was already seen.  Well estimated even far from saturation, where the
    #: richness estimate is only a lower bound.
    sample_coverage: float = 1.0

    @property
    def unseen(self) -> float:
        return self.estimate - self.observed

    @property
    def completeness(self) -> float:
        """observed / estimated: the fraction of the estimated population the campaign saw."""
        return self.observed / self.estimate if self.estimate else 1.0

    @property
    def completeness_low(self) -> float:
        """observed / upper bound: the fraction seen at the least (within the interval)."""
        return self.observed / self.high if self.high else 1.0

    def brackets(self, true_count: int) -> bool:
        return self.low <= true_count <= self.high

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(unseen=round(self.unseen, 3), completeness=round(self.completeness, 4),
                 completeness_low=round(self.completeness_low, 4))
        for k in ("estimate", "se", "low", "high", "sample_coverage"):
            d[k] = round(d[k], 3)
        return d

    def describe(self) -> str:
        pct = int(round(self.conf * 100))
        return (f"{self.observed:,} seen, Chao2 estimate {self.estimate:,.1f} ({pct}% CI {self.low:,.1f}-{self.high:,.1f}); "
                f"{100 * self.completeness:.1f}% of the estimate seen (at least {100 * self.completeness_low:.1f}%); "
                f"sample coverage {100 * self.sample_coverage:.1f}%")

    @property
    def far_from_saturation(self) -> bool:
        """Most of what was seen was seen once: the richness estimate is then a weak lower bound
        (heterogeneous detection; Chao and Colwell 2017), and the true remainder may be far larger."""
        return self.q1 > self.observed / 2


def frequency_counts(incidences: Iterable[int]) -> dict[int, int]:
    """k -> how many items were met in exactly k sampling units (items never met are not given)."""
    return dict(sorted(Counter(int(k) for k in incidences if k > 0).items()))


def chao2(freq: Mapping[int, int], units: int, conf: float = 0.95) -> Estimate:
    """Bias-corrected Chao2 from incidence frequency counts ``freq`` (k -> number of items met in
    exactly k of the ``units`` sampling units), with a ``conf`` confidence interval.

    Point estimate (bias-corrected form, defined for every Q1, Q2):
    ``S_obs + (m-1)/m * Q1 (Q1-1) / (2 (Q2+1))``.  Variance: the delta-method variance of that form
    (EstimateS, Colwell; Chao 2005).  Interval: log-normal on the unseen part ``T = S - S_obs``
    (Chao 1987), so that the lower bound never falls below what was seen:
    ``[S_obs + T/K, S_obs + T*K]`` with ``K = exp(z sqrt(ln(1 + var/T^2)))``.  When nothing is
    estimated unseen (Q1 <= 1), the interval of Chao's SpadeR for that case: from the chance
    ``P = sum_k Q_k e^{-k} / S_obs`` that an item is missed by a further comparable sample."""
    if units < 1:
        raise ValueError(f"units: need at least one sampling unit, got {units}")
    if not 0 < conf < 1:
        raise ValueError(f"conf: must lie in (0, 1), got {conf}")
    freq = {int(k): int(v) for k, v in freq.items() if v}
    if any(k < 1 or k > units for k in freq):
        raise ValueError(f"incidence counts must lie in 1..{units} (the number of units); got {sorted(freq)}")
    s_obs = sum(freq.values())
    q1, q2 = freq.get(1, 0), freq.get(2, 0)
    z = NormalDist().inv_cdf(0.5 + conf / 2)
    a = (units - 1) / units
    f0 = a * q1 * (q1 - 1) / (2 * (q2 + 1))
    est = s_obs + f0
    if f0 > 0:
        var = (a * q1 * (q1 - 1) / (2 * (q2 + 1))
               + a * a * q1 * (2 * q1 - 1) ** 2 / (4 * (q2 + 1) ** 2)
               + a * a * q1 * q1 * q2 * (q1 - 1) ** 2 / (4 * (q2 + 1) ** 4))
        k = math.exp(z * math.sqrt(math.log(1 + var / (f0 * f0))))
        low, high = s_obs + f0 / k, s_obs + f0 * k
    elif s_obs == 0:
        var, low, high = 0.0, 0.0, 0.0
    else:
        p = sum(v * math.exp(-k) for k, v in freq.items()) / s_obs
        var = max(0.0, sum(v * (math.exp(-k) - math.exp(-2 * k)) for k, v in freq.items())
                  - sum(k * math.exp(-k) * v for k, v in freq.items()) ** 2 / units)
        half = z * math.sqrt(var) / (1 - p)
        # Nothing is estimated unseen, so the point estimate is S_obs: the interval runs from it
        # (never above it: chao2({2: 57}, 2) once gave 57.0 with the interval 65.9-65.9) up to
        # SpadeR's upper bound for this case
        low, high = s_obs, max(s_obs, s_obs / (1 - p) + half)
    total = sum(k * v for k, v in freq.items())  # U: incidences in all
    if q1 and total:
        left = ((units - 1) * q1 / ((units - 1) * q1 + 2 * q2) if q2
                else (units - 1) * (q1 - 1) / ((units - 1) * (q1 - 1) + 2))
        cover = 1 - q1 / total * left
    else:
        cover = 1.0
    return Estimate(observed=s_obs, units=units, q1=q1, q2=q2, estimate=est, se=math.sqrt(var),
                    low=low, high=max(high, est), conf=conf, sample_coverage=cover)


def sample_unit(mode: str, block: int) -> str:
    """The sampling unit of a replay mode, in words (see the module docstring for why)."""
    return f"block of {block} traces" if mode == "coverage" else "trace"


def unit_of(mode: str, index: int, block: int) -> int:
    """The sampling unit that trace ``index`` belongs to."""
    return index // block if mode == "coverage" else index


def units_in(mode: str, traces: int, block: int) -> int:
    return (traces + block - 1) // block if mode == "coverage" else traces


def growth_at_powers_of_two(first_hits: Iterable[tuple[int, int]], traces: int) -> list[tuple[int, int]]:
    """(traces replayed, distinct items seen by then) at 1, 2, 4, ... and at ``traces`` itself, from
    ``(first trace index, how many items were first seen there)`` pairs."""
    hits = sorted(first_hits)
    points = []
    n = 1
    marks = []
    while n < traces:
        marks.append(n)
        n *= 2
    marks.append(traces)
    total, i = 0, 0
    for t in marks:
        while i < len(hits) and hits[i][0] < t:
            total += hits[i][1]
            i += 1
        points.append((t, total))
    return points


def state_class(model, state, by_step: bool = False) -> str:
    """The kind of a state for the rarity table: the set of action names it enables
    (``credit, enqueue, pull``), or ``(terminal)``.  A generic grouping every model has: two states
    of one kind offer the environment the same kinds of choice.  ``by_step`` (the thread level, whose
    thread steps are all the action ``step``): the names of the model steps the state enables, from
    each successor's observation label (conformance/consumer_lists/thread_steps.py ``_label``)."""
    if by_step:
        names = sorted({o[0][0] for _a, o, _t in model.successors(state)})
        return ", ".join(names) if names else "(terminal)"
    names = sorted({a[0] if isinstance(a, tuple) and a else str(a) for a in model.actions(state)})
    return ", ".join(names) if names else "(terminal)"


def rare_classes(rows: Iterable[tuple[str, int, int]], limit: int = 10) -> list[dict[str, Any]]:
    """The rarest kinds of states, from ``(class, incidence, how many states)`` rows: per kind the
    distinct states seen, how many of those were met in one unit only, and the unit-visits in all
    (the sum of incidences); rarest first (fewest unit-visits per state, then fewest unit-visits)."""
    by: dict[str, list[int]] = {}
    for cls, units, count in rows:
        b = by.setdefault(cls or "?", [0, 0, 0])
        b[0] += count
        b[1] += count if units == 1 else 0
        b[2] += (units or 0) * count
    out = [{"class": c, "states": s, "seen_once": q1, "unit_visits": v} for c, (s, q1, v) in by.items()]
    out.sort(key=lambda r: (r["unit_visits"] / r["states"], r["unit_visits"], r["class"]))
    return out[:limit]


def chao2_verdict(est: dict[str, Any] | None, truth: int | None) -> dict[str, Any] | None:
    """A Chao2 estimate with what the truth (the explored graph's count, when known) says of it:
    ``held`` (the interval holds the true count), and ``verdict``, a sentence that states a missed
    interval as a miss ("missed: the true count is 4.1x the upper bound")."""
    if not est:
        return None
    out = dict(est)
    out["truth"] = truth
    if truth is None:
        out["held"] = None
        out["verdict"] = "no exhaustive graph to compare with: read the estimate as a lower bound"
    elif est["low"] <= truth <= est["high"]:
        out["held"] = True
        out["verdict"] = f"the interval holds the true count ({truth:,})"
    else:
        out["held"] = False
        if truth > est["high"]:
            ratio = truth / est["high"] if est["high"] else float("inf")
            out["verdict"] = f"missed: the true count {truth:,} is {ratio:.1f}x the interval's upper bound"
        else:
            out["verdict"] = f"missed: the true count {truth:,} is below the interval's lower bound"
    return out
