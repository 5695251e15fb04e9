"""Every condition of a promise can fail: remove one at a time, and some claim case must get another verdict.

The mutants are derived, not written: from the source of a claim's ``expect`` (every operand of ``and``/``or``,
every operand of a chained comparison, a lone comparison replaced by ``True``, an expectation that is one other
condition such as ``f["x"]``, ``not f["x"]`` or ``all(...)`` replaced by ``True``, an ``if`` that returns early
removed) and of its ``facts`` (every operand of an ``and`` or chained comparison in the condition of a
comprehension: the per-repeat tests that decide a count). Each mutant replaces the function in a copy of the
claim, which is judged on the cases of tests/claim_cases (the kept observations, each ``holds_too`` and every
breaking edit); a mutant is caught when at least one of those verdicts differs from the real claim's.

Every promise and old text must have no survivor (issue 25 named the promises whose conditions no case could
break first: NAMED). A mutant no observation the lab can record could tell apart by its verdict (an equivalent
mutant) is listed in EQUIVALENT with why; each listed one must still be derived and still survive, so the list
cannot go stale. The counts are printed (``-s``): mutants, survivors, equivalent.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
from collections.abc import Callable, Iterator
from functools import cache

import pytest

from tests.test_claims_can_fail import CASES, JUDGED, apply, fixture_observations

# Issue 25: the promises (and the condition named there) that survived one condition's removal.
NAMED = {
    "migrate.runtime-binds-primary": ["in_primary", "bound_primary"],
    "lifecycle.set-device-flags-first-call": ["active_after_first"],
    "refcount.thread-exit": ["exported"],
    "refcount.green-retains-primary": ["active_after_create"],
    "refcount.attach-detach-count": ["first_detach"],
    "interop.exchange.torch-to-numba": ["correct"],
}

# Equivalent mutants: (claim, what was removed) -> why no recordable observation changes the verdict.
_OWNER_GUARD = ("alone_pointer's guard keeps a run whose allocation has no known owner (None) from counting as in "
                "the primary context while none is active (primary None): a count the evidence prints. The verdict "
                "cannot tell: the promise also needs current == primary in that same run, which only a primary handle "
                "meets (cuCtxGetCurrent's handle is 0 for none, the primary handle None while inactive, never 0)")
_NOT_READ = ("cuda.core promises the current context only: alone_pointer is evidence (where its allocation lands is "
             "recorded), a fact its expectation never reads")
EQUIVALENT = {
    ("interop.cupy.context", "facts: v['pointer_context']"): _OWNER_GUARD,
    ("interop.torch.context", "facts: v['pointer_context']"): _OWNER_GUARD,
    ("interop.cuda-core.context", "facts: v['pointer_context']"): _NOT_READ,
    ("interop.cuda-core.context", "facts: v['pointer_context'] == v['primary']"): _NOT_READ,
}


# ---------------------------------------------------------------- finding a function's syntax tree

@cache
def _module_tree(path: str) -> ast.Module:
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read())


def function_node(fn: Callable) -> ast.FunctionDef | ast.Lambda:
    """The ``def`` or ``lambda`` that compiled to ``fn`` (found by file and first line)."""
    code = fn.__code__
    tree = _module_tree(inspect.getsourcefile(fn) or code.co_filename)
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.Lambda)
             and n.lineno == code.co_firstlineno
             and (isinstance(n, ast.Lambda) or n.name == code.co_name)]
    if len(found) != 1:
        raise LookupError(f"{code.co_name} at line {code.co_firstlineno}: {len(found)} candidate(s)")
    return found[0]


def rebuild(fn: Callable, node: ast.FunctionDef | ast.Lambda) -> Callable:
    """Compile ``node`` in ``fn``'s module, with ``fn``'s closure values: the mutant as a function."""
    free = list(fn.__code__.co_freevars)
    cells = [c.cell_contents for c in (fn.__closure__ or ())]
    inner: ast.stmt = node if isinstance(node, ast.FunctionDef) else ast.Return(value=node)
    body = [inner, ast.Return(value=ast.Name(id=node.name, ctx=ast.Load()))] if isinstance(node, ast.FunctionDef) \
        else [inner]
    factory = ast.FunctionDef(name="__mutant_factory", args=ast.arguments(
        posonlyargs=[], args=[ast.arg(arg=name) for name in free], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=body, decorator_list=[], returns=None, type_params=[])
    module = ast.fix_missing_locations(ast.Module(body=[factory], type_ignores=[]))
    namespace: dict = {}
    exec(compile(module, f"<mutant of {fn.__code__.co_name}>", "exec"), fn.__globals__, namespace)
    return namespace["__mutant_factory"](*cells)


# ---------------------------------------------------------------- mutation sites

@dataclasses.dataclass(frozen=True)
class Site:
    kind: str  # "operand" (of and/or), "chain" (operand of a chained comparison), "true" (a lone comparison), "if"
    index: int  # which node of that kind, in walk order
    operand: int = 0


def _parents(root: ast.AST) -> dict[int, ast.AST]:
    return {id(child): parent for parent in ast.walk(root) for child in ast.iter_child_nodes(parent)}


def _in_comprehension_test(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    while id(node) in parents:
        parent = parents[id(node)]
        if isinstance(parent, ast.comprehension) and any(node is test for test in parent.ifs):
            return True
        node = parent
    return False


def _lone_condition(node: ast.AST) -> ast.expr | None:
    """What a ``lambda`` or ``return`` gives when it is one condition that no other site covers (``f["x"]``,
    ``not f["x"]``, ``all(...)``): not an ``and``/``or``, a comparison or a constant."""
    value = node.body if isinstance(node, ast.Lambda) else node.value if isinstance(node, ast.Return) else None
    if value is None or isinstance(value, ast.BoolOp | ast.Compare | ast.Constant):
        return None
    return value


def _candidates(root: ast.AST, facts: bool) -> Iterator[tuple[str, ast.AST]]:
    parents = _parents(root)
    for node in ast.walk(root):
        if facts and not _in_comprehension_test(node, parents):
            continue
        lone = None if facts or not (node is root or isinstance(node, ast.Return)) else _lone_condition(node)
        if lone is not None:
            yield "true", lone
        if isinstance(node, ast.BoolOp) and (not facts or isinstance(node.op, ast.And)):
            yield "operand", node
        elif isinstance(node, ast.Compare) and len(node.comparators) > 1:
            yield "chain", node
        elif isinstance(node, ast.Compare) and not facts and not isinstance(parents.get(id(node)), ast.BoolOp):
            yield "true", node
        elif isinstance(node, ast.If) and not facts and any(isinstance(s, ast.Return) for s in node.body):
            yield "if", node


def sites(root: ast.AST, facts: bool) -> list[Site]:
    out, counts = [], {}
    for kind, node in _candidates(root, facts):
        i = counts[kind] = counts.get(kind, -1) + 1
        width = {"operand": lambda n: len(n.values), "chain": lambda n: len(n.comparators) + 1}.get(kind)
        out += [Site(kind, i, k) for k in range(width(node))] if width else [Site(kind, i)]
    return out


def _replace(root: ast.AST, old: ast.AST, new: ast.AST) -> None:
    parent = _parents(root)[id(old)]
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
        elif isinstance(value, list):
            setattr(parent, field, [new if v is old else v for v in value])


def mutate(root: ast.AST, site: Site, facts: bool) -> tuple[ast.AST, str]:
    """A copy of ``root`` with one condition removed, and what was removed (as source)."""
    tree = copy.deepcopy(root)
    node = [n for kind, n in _candidates(tree, facts) if kind == site.kind][site.index]
    if site.kind == "operand":
        assert isinstance(node, ast.BoolOp)
        removed = node.values[site.operand]
        rest = [v for i, v in enumerate(node.values) if i != site.operand]
        _replace(tree, node, rest[0] if len(rest) == 1 else ast.BoolOp(op=node.op, values=rest))
        return tree, ast.unparse(removed)
    if site.kind == "chain":
        assert isinstance(node, ast.Compare)
        operands, ops = [node.left, *node.comparators], list(node.ops)
        removed = operands.pop(site.operand)
        ops.pop(max(site.operand - 1, 0))
        _replace(tree, node, ast.Compare(left=operands[0], ops=ops, comparators=operands[1:]))
        return tree, f"{ast.unparse(removed)} from {ast.unparse(node)}"
    if site.kind == "true":
        _replace(tree, node, ast.Constant(value=True))
        return tree, ast.unparse(node)
    _replace(tree, node, ast.Pass())
    return tree, f"if {ast.unparse(node.test)}"  # type: ignore[attr-defined]


def mutants(claim) -> Iterator[tuple[str, object]]:
    """(what was removed, the claim with it removed), for every site of ``expect`` and of ``facts``."""
    for field, facts in (("expect", False), ("facts", True)):
        fn = getattr(claim, field)
        root = function_node(fn)
        for site in sites(root, facts):
            tree, removed = mutate(root, site, facts)
            yield f"{field}: {removed}", dataclasses.replace(claim, **{field: rebuild(fn, tree)})


# ---------------------------------------------------------------- judging a mutant

def case_inputs(claim_id: str) -> list[list]:
    case = CASES[claim_id]
    observations = fixture_observations(case.fixture)
    kept = apply(case.keep, observations)
    return [kept, *(apply(other, observations) for other in (*case.holds_too, *case.unmet)),
            *(b(kept) for b in case.breaks)]


def verdicts(claim, inputs) -> list[str]:
    return [claim.result(obs).verdict for obs in inputs]


def survivors(claim) -> tuple[int, list[str]]:
    inputs = case_inputs(claim.id)
    real = verdicts(claim, inputs)
    found, alive = 0, []
    for removed, mutant in mutants(claim):
        found += 1
        if verdicts(mutant, inputs) == real:
            alive.append(removed)
    return found, alive


CLAIMS = {c.id: c for c in JUDGED}


def unexplained(claim_id: str, alive: list[str]) -> list[str]:
    """The survivors EQUIVALENT does not list."""
    return [removed for removed in alive if (claim_id, removed) not in EQUIVALENT]


@pytest.mark.parametrize("claim_id", sorted(CLAIMS))
def test_no_condition_survives_its_removal(claim_id):
    count, alive = survivors(CLAIMS[claim_id])
    assert count > 0, f"{claim_id}: no condition found to remove"
    left = unexplained(claim_id, alive)
    assert not left, f"{claim_id}: {len(left)} of {count} mutant(s) survive every case: {left}"


@pytest.mark.parametrize("claim_id", sorted(NAMED))
def test_the_conditions_issue_25_named_are_among_the_mutants(claim_id):
    removed = [what for what, _ in mutants(CLAIMS[claim_id])]
    for name in NAMED[claim_id]:
        assert any(name in what for what in removed), (name, removed)


@pytest.mark.parametrize(("claim_id", "removed"), sorted(EQUIVALENT), ids=lambda v: v)
def test_a_listed_equivalent_mutant_is_still_derived_and_still_survives(claim_id, removed):
    assert EQUIVALENT[claim_id, removed]
    assert removed in [what for what, _ in mutants(CLAIMS[claim_id])], "no longer derived: remove it from EQUIVALENT"
    assert removed in survivors(CLAIMS[claim_id])[1], "a case catches it now: remove it from EQUIVALENT"


def test_removing_a_condition_is_caught_by_a_case_and_a_survivor_is_reported():
    """The machinery itself: a condition no case reads survives; one a case breaks does not."""
    from ctxlab.claim import Claim

    claim = Claim("x.m", "s", "src", "promise", ("a",), lambda obs: {"a": len(obs) == 0, "b": True}, "{a} {b}",
                  lambda f: f["a"] and f["b"])
    real = verdicts(claim, [[]])
    left = {removed: verdicts(m, [[]]) == real for removed, m in mutants(claim)}
    assert left == {"expect: f['a']": True, "expect: f['b']": True}
    lone = dataclasses.replace(claim, expect=lambda f: not f["a"])
    assert [removed for removed, _ in mutants(lone)] == ["expect: not f['a']"]
    assert unexplained("x.m", ["expect: f['a']"]) == ["expect: f['a']"]  # a survivor outside NAMED still counts


def test_every_promise_and_old_text_counted():
    total, alive, equivalent = 0, {}, 0
    for claim in JUDGED:
        count, left = survivors(claim)
        total += count
        equivalent += len(left) - len(unexplained(claim.id, left))
        if unexplained(claim.id, left):
            alive[claim.id] = unexplained(claim.id, left)
    print(f"\nmutants: {total} in {len(JUDGED)} claim(s); survivors: {sum(map(len, alive.values()))} in "
          f"{len(alive)} claim(s); equivalent (listed in EQUIVALENT, each with why): {equivalent}")
    for cid, left in sorted(alive.items()):
        print(f"  {cid}: {left}")
    assert total > 0
    assert not alive
