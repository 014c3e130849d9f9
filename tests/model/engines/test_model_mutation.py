"""Model mutation coverage (issue 31): the operators, the isolated loading, the verdicts.

Cheap by construction: a toy package of a few states, and on consumer lists only the mutants of
``_pull_find`` on the small configuration, in this process (``workers=0``)."""

from __future__ import annotations

import ast
import sys
import textwrap

import pytest

from conq.model.engines.graph_diff import describe, graph_diff, graph_print
from conq.model.engines.isolated import IsolatedPackage, package_of
from conq.model.engines.model_mutation import (
    SuiteConfig,
    arguments_from_markdown,
    killed_by,
    make_model,
    run_mutation,
)
from conq.model.engines.mutate_ast import enumerate_mutants, mutated_tree, step_functions
from conq.model.engines.explorer import explore

CL = "conq.model.consumer_lists:ConsumerListsModel"

TOY = '''
from dataclasses import dataclass
from conq.model.kernel import Model, always, sometimes

NAMES = ("zero", "one", "two", "three")


@dataclass(frozen=True)
class ToyConfig:
    limit: int = 3


class ToyModel(Model):
    """A counter the environment moves up to ``limit`` and down to 0."""

    name = "toyq"
    Config = ToyConfig

    @classmethod
    def configs(cls):
        return {"small": ToyConfig()}

    def init_states(self):
        return [(0, 0)]

    def actions(self, s):
        out = []
        if s[0] < self.config.limit:
            out.append(("up",))
        if s[0] > 0 and s[1] == 0:
            out.append(("down",))
        return out

    def step(self, s, a):
        if a[0] == "up":
            return [(NAMES[s[0] + 1], (s[0] + 1, s[1]))]
        if a[0] == "down":
            return [("ok", (s[0] - 1, s[1]))]
        return []

    def view(self, s):
        return {"count": s[0]}

    def describe_me(self):  # reached from no entry point: not step code
        return self.config.limit > 2

    def properties(self):
        return [
            always("never-negative", "the count is never negative", lambda s: s[0] >= 0,
                   witness=lambda s: s[0] == 0),
            sometimes("reaches-three", "the count reaches three", lambda s: s[0] == 3),
        ]
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    pkg = tmp_path / "conq_toy_mutation"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .model import ToyModel\n")
    (pkg / "model.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield pkg
    for k in [k for k in sys.modules if k.startswith("conq_toy_mutation")]:
        del sys.modules[k]


def _by_detail(results, text):
    found = [r for r in results if text in r["detail"]]
    assert len(found) == 1, [r["detail"] for r in results]
    return found[0]


def test_operators_on_the_toy(toy):
    ms = enumerate_mutants(toy)
    ops = {m.operator for m in ms}
    assert {"negate-condition", "drop-conjunct", "change-comparison", "change-bound"} <= ops
    assert not any(m.function.endswith("describe_me") or m.function.endswith("view") for m in ms)
    # every mutant is a different program, and the file on disk stays as it was
    before = (toy / "model.py").read_text()
    texts = {ast.unparse(mutated_tree(toy / m.name, m)) for m in ms}
    assert len(texts) == len(ms)
    assert (toy / "model.py").read_text() == before


def test_step_code_is_what_the_entry_points_reach():
    trees = {"m.py": ast.parse(textwrap.dedent('''
        def _helper(): pass
        def _claims_only(): pass
        class M:
            TABLE = {"x": "_by_table"}
            def step(self, s, a): return getattr(self, self.TABLE["x"])() + _helper()
            def _by_table(self): return self._deep()
            def _deep(self): return 1
            def view(self, s): return _claims_only()
        '''))}
    assert step_functions(trees) == {("m.py", "M.step"), ("m.py", "M._by_table"), ("m.py", "M._deep"), ("m.py", "_helper")}


def test_isolated_package_is_new_modules(toy):
    import conq_toy_mutation

    with IsolatedPackage(toy, {"model.py": TOY.replace('"zero"', '"nil"')}) as pkg:
        cls = pkg.get("ToyModel")
        assert cls is not conq_toy_mutation.ToyModel
        assert sys.modules[pkg.name + ".model"].NAMES[0] == "nil"
        assert conq_toy_mutation.model.NAMES[0] == "zero"
    assert pkg.name not in sys.modules


def test_toy_verdicts(toy):
    rep = run_mutation("toyq", "conq_toy_mutation:ToyModel", [SuiteConfig.of("small")], workers=0,
                       arguments={})
    res = rep.results
    # the down guard moved by one: a negative count, named by the claim, with its counterexample
    r = _by_detail(res, "`s[0] > 0 and s[1] == 0` -> `not (s[0] > 0 and s[1] == 0)`")
    assert r["verdict"] == "killed" and r["property"] == "never-negative" and r["length"] == 1
    # the up guard's bound moved: the step raises (no name for a fourth value), and no claim says why
    r = _by_detail(res, "`s[0] < self.config.limit` -> `s[0] <= self.config.limit`")
    assert r["verdict"] == "crashed" and "IndexError" in r["error"] and "model.py:" in r["error"]
    # down never enabled: fewer states, every claim keeps its verdict (the witness of never-negative is
    # the initial state): a specification hole
    r = _by_detail(res, "`s[1] == 0` -> `s[1] == 1`")
    assert r["verdict"] == "count-only" and r["changed"]["states"] == {"model": 4, "mutant": 4}
    assert r["changed"]["transitions"] == {"model": 6, "mutant": 3}
    assert r["changed"]["only_model"] is None and r["changed"]["only_mutant"] is None
    # up never enabled: the witness of reaches-three is lost
    r = _by_detail(res, "`s[0] < self.config.limit` -> `not (s[0] < self.config.limit)`")
    assert r["verdict"] == "killed" and r["how"] == "witness lost" and r["property"] == "reaches-three"
    r = _by_detail(res, "drop `s[1] == 0` from")
    assert r["verdict"] == "equivalent"  # s[1] is always 0
    j = rep.to_json()
    assert j["mutants"] == len(res) == j["killed"] + j["count_only"] + j["argued"] + j["equivalent"] + j["crashed"]
    assert all({"location", "operator", "verdict"} <= set(r) for r in j["results"])


def test_count_only_then_argued(toy):
    # without the table, the fourth value raises nothing: a specification hole, with the path to the state
    # only the mutant has
    src = TOY.replace('return [(NAMES[s[0] + 1], (s[0] + 1, s[1]))]', 'return [("ok", (s[0] + 1, s[1]))]')
    (toy / "model.py").write_text(src)
    rep = run_mutation("toyq", "conq_toy_mutation:ToyModel", [SuiteConfig.of("small")], workers=0)
    r = _by_detail(rep.results, "`s[0] < self.config.limit` -> `s[0] <= self.config.limit`")
    assert r["verdict"] == "count-only"
    ch = r["changed"]
    assert ch["states"] == {"model": 4, "mutant": 5}
    assert ch["only_mutant"]["length"] == 4 and ch["only_mutant"]["state"] == {"count": 4}
    assert not rep.ok
    page = f"# toy\n\n## Mutation coverage\n\n- `{r['id']}`: the limit is a bound of the check, not a rule.\n"
    rep2 = run_mutation("toyq", "conq_toy_mutation:ToyModel", [SuiteConfig.of("small")], workers=0,
                        arguments=arguments_from_markdown(page), only=[r["id"]])
    assert rep2.results[0]["verdict"] == "argued" and "not a rule" in rep2.results[0]["argument"]
    assert rep2.ok and rep2.to_json()["count_only"] == 0


def test_arguments_section_only():
    text = ("# m\n\n- `cl-00000000` outside\n\n## Mutation coverage\n\n### Arguments\n\n"
            "- `cl-1234abcd` (`f`, drop-update): first line\n  continued here\n- `oc-89abcdef`: second\n\n"
            "## Next section\n\n- `cl-ffffffff` not an argument\n")
    assert arguments_from_markdown(text) == {"cl-1234abcd": "(`f`, drop-update): first line continued here",
                                             "oc-89abcdef": "second"}


def test_killed_by_orders_and_names():
    base = {"a": ("holds", 3), "b": ("witnessed", 2), "c": ("violated", 5), "d": ("holds", 1)}
    found = {"a": ("violated", 7), "b": ("unreached", None), "c": ("holds", 4), "e": ("violated", 2)}
    got = killed_by(base, found)
    assert [(k["property"], k["how"]) for k in got] == [
        ("e", "violated"), ("a", "violated"), ("b", "witness lost"), ("c", "violation gone"), ("d", "claim gone")]


def _pull_find_ids():
    d, _ = package_of(CL)
    return {m.detail: m.ident("cl") for m in enumerate_mutants(d) if m.function.endswith("._pull_find")}


def test_credit_test_removal_is_killed_by_a_named_claim():
    """Issue 31's example: drop the credit test from _pull_find; consumer lists small."""
    ids = _pull_find_ids()
    credit = ids["drop `s[b + F_CREDIT] > 0` from `j is not None and (not blocked) and (s[b + F_CREDIT] > 0)`"]
    blocked = ids["drop `not blocked` from `j is not None and (not blocked) and (s[b + F_CREDIT] > 0)`"]
    rep = run_mutation("consumer-lists", CL, [SuiteConfig.of("small")], workers=0, only=[credit, blocked], lines=False)
    by = {r["id"]: r for r in rep.results}
    assert by[credit]["verdict"] == "killed"
    # the look that picks an entry without credit (length 9) comes before the credit of -1 (length 10)
    assert by[credit]["property"] == "find-takes-the-first-entry-it-may" and by[credit]["length"] == 9
    assert {"credit-never-negative", "taken-only-with-credit"} <= set(by[credit]["properties"])
    # a credit of -1 is outside the packed view's domains: searched as tuples, still the mutant's code
    assert by[credit]["view"] == "tuples"
    # the packed view (what the explorer runs by default) runs the mutant's code too
    assert by[blocked]["verdict"] == "killed" and by[blocked]["property"] == "priority-respected"
    assert by[blocked]["view"] == "packed"


def test_graph_diff_explains_a_changed_model():
    d, cls_name = package_of(CL)
    from conq.model.consumer_lists import ConsumerListsModel

    ms = [m for m in enumerate_mutants(d) if m.function.endswith("._pull_find") and "F_CREDIT] > 0`" in m.detail
          and m.operator == "drop-conjunct"]
    cfg = SuiteConfig.of("small")
    base = explore(make_model(ConsumerListsModel, cfg), keep_edges=True)
    with IsolatedPackage(d, {ms[0].name: mutated_tree(d / ms[0].name, ms[0])}) as pkg:
        mut = explore(make_model(pkg.get(cls_name), cfg), keep_edges=True)
        diff = graph_diff(base, mut, names=("model", "mutant"))
    assert diff["states"] == {"model": 3106, "mutant": 5181}
    assert {"property": "credit-never-negative", "model": "holds", "mutant": "violated"} in diff["verdicts"]
    assert diff["same_graph"] is False
    # the mutant reaches states the model does not (a consumer at credit -1), and misses some the model
    # has (a pull that found nothing for want of credit): a shortest path to each
    assert diff["only_mutant"]["length"] <= 10 and diff["only_model"]["length"] >= 1
    text = "\n".join(describe(diff, ("model", "mutant")))
    assert "verdict of 'credit-never-negative': model holds, mutant violated" in text
    assert graph_print(base).same(graph_print(explore(make_model(ConsumerListsModel, cfg), keep_edges=True)))


def test_a_changed_model_explains_itself_against_the_pinned_one():
    """The manifest-mismatch explanation: the model as pinned against the model as found (here the
    credit test removed), each loaded in isolation from its sources."""
    from conq.model.engines.model_mutation import explain_change
    from conq.model.engines.mutate_ast import package_sources

    d, _ = package_of(CL)
    src = package_sources(d)
    m = [m for m in enumerate_mutants(d, sources=src) if m.function.endswith("._pull_find")
         and m.detail.startswith("drop `s[b + F_CREDIT] > 0`")][0]
    found = dict(src, **{m.name: ast.unparse(mutated_tree(src[m.name], m))})
    diff = explain_change(CL, SuiteConfig.of("small"), src, new_sources=found)
    assert diff["states"] == {"pinned": 3106, "found": 5181}
    lines = describe(diff, ("pinned", "found"))
    assert "verdict of 'credit-never-negative': pinned holds, found violated" in lines
    assert any(line.startswith("a state only found reaches") for line in lines)


def test_pinned_sources_come_from_git():
    from conq.mutate import pinned_sources

    got = pinned_sources("recovery-deferral")
    if got is None:
        pytest.skip("not a git checkout")
    rev, sources = got
    assert "model.py" in sources and "class RecoveryDeferralModel" in sources["model.py"]


def test_a_sample_reports_the_mutants_it_searched(toy):
    """The main job's sample: the first mutants by id among those whose code runs, each reported with
    the verdict of its own search (the same as searched alone)."""
    cfg = [SuiteConfig.of("small")]
    rep = run_mutation("toyq", "conq_toy_mutation:ToyModel", cfg, workers=0, sample=3)
    every = run_mutation("toyq", "conq_toy_mutation:ToyModel", cfg, workers=0)
    run_ids = sorted(r["id"] for r in every.results if r.get("configs_run"))
    assert [r["id"] for r in rep.results] == sorted(run_ids[:3], key=lambda i: [x["id"] for x in every.results].index(i))
    by = {r["id"]: r for r in every.results}
    assert all(r["verdict"] == by[r["id"]]["verdict"] and r["detail"] == by[r["id"]]["detail"] for r in rep.results)
    assert rep.population == {"mutants": len(every.results), "run": len(run_ids), "sampled": 3}
