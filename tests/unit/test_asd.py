"""ASD on hand-made logits: gate, budget ledger, cap, suffix reuse, trees, strict identity."""

from __future__ import annotations

import itertools

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from racer_bench.engine.structs import Draft
from racer_bench.engine.verify.asd import ASDVerifier, leaf_paths, scan_path, suffix_values
from racer_bench.engine.verify.greedy import GreedyVerifier
from tests.conftest import CONF_DIR

V = 8
TOP = 10.0
RNG = torch.Generator().manual_seed(0)


def rows(*specs: tuple[int, dict[int, float]]) -> torch.Tensor:
    """Logits FloatTensor[len(specs), V]: row r has argmax ``specs[r][0]`` (logit TOP) and
    ``TOP - gap`` for each ``token: gap`` in ``specs[r][1]``; every other token sits 5 below."""
    out = torch.full((len(specs), V), TOP - 5.0)
    for r, (top, gaps) in enumerate(specs):
        out[r, top] = TOP
        for token, gap in gaps.items():
            out[r, token] = TOP - gap
    return out


def tree(tokens: list[int], parents: list[int]) -> Draft:
    return Draft(tokens=torch.tensor(tokens), parents=torch.tensor(parents))


# --- the pure scan ------------------------------------------------------------------------


def test_suffix_values():
    assert suffix_values(4, "count") == [4.0, 3.0, 2.0, 1.0]
    assert suffix_values(4, "normalized") == [1.0, 0.75, 0.5, 0.25]
    with pytest.raises(ValueError):
        suffix_values(3, "linear")


def test_scan_accepts_cheap_mismatch_and_continues():
    d = scan_path([0, 0.5, 0, 0], [False, True, False, False], 8.0, 0.25, 2, [4, 3, 2, 1])
    assert (d.accepted, d.relaxed, d.risk) == (4, 1, 0.5)


def test_scan_gate_uses_suffix_value():
    mism = [False, True, False, False]
    assert scan_path([0, 1.0, 0, 0], mism, 8.0, 0.25, 2, [4, 3, 2, 1]).accepted == 1  # 1/3
    assert scan_path([0, 0.7, 0, 0], mism, 8.0, 0.25, 2, [4, 3, 2, 1]).accepted == 4  # 0.7/3
    normalized = suffix_values(4, "normalized")
    assert scan_path([0, 0.5, 0, 0], mism, 8.0, 0.25, 2, normalized).accepted == 1  # 0.5/0.75
    assert scan_path([0, 0.5, 0, 0], mism, 8.0, 1.0, 2, normalized).accepted == 4


def test_scan_budget_and_cap():
    mism = [True, True, False]
    values = [3.0, 2.0, 1.0]
    d = scan_path([0.5, 0.3, 0], mism, 0.6, 1.0, 2, values)  # 0.8 > 0.6 left
    assert (d.accepted, d.relaxed, d.risk) == (1, 1, 0.5)
    assert scan_path([0.5, 0.3, 0], mism, 0.8, 1.0, 2, values).accepted == 3
    d = scan_path([0.5, 0.3, 0], mism, 8.0, 1.0, 1, values)  # cap 1
    assert (d.accepted, d.relaxed, d.risk) == (1, 1, 0.5)


def test_reproduction_strict_needs_budget_left_before_the_token():
    """A zero-regret mismatch (a tie) after the budget is used up: only the strict variant stops."""
    args = ([0.5, 0.0], [True, True], 0.5, 1.0, 2, [2.0, 1.0])
    assert scan_path(*args).accepted == 2
    assert scan_path(*args, reproduction_strict=True).accepted == 1


def test_leaf_paths():
    assert leaf_paths([-1, 0, 0, -1, 2]) == [[0, 1], [3], [0, 2, 4]]
    assert leaf_paths([]) == []


# --- the verifier on chains ---------------------------------------------------------------


def chain_case(gap: float) -> tuple[Draft, torch.Tensor]:
    """Draft [1, 7, 3, 4]: node 1 (token 7) is a mismatch of regret ``gap`` (argmax 2);
    after it the target agrees with the draft again (3, 4), then wants 5."""
    logits = rows((1, {}), (2, {7: gap}), (3, {}), (4, {}), (5, {}))
    return Draft.chain([1, 7, 3, 4]), logits


def test_low_regret_mismatch_accepted_and_suffix_reused():
    draft, logits = chain_case(gap=0.5)  # 0.5 / (4 - 1) <= 0.25
    res = ASDVerifier(budget=8, gate=0.25, cap=2).verify(draft, logits, RNG)
    assert res.accepted == [0, 1, 2, 3] and res.bonus == 5
    assert res.n_relaxed == 1 and res.regret == pytest.approx(0.5)


def test_gate_rejects_expensive_mismatch():
    draft, logits = chain_case(gap=1.0)  # 1.0 / 3 > 0.25
    res = ASDVerifier(budget=8, gate=0.25, cap=2).verify(draft, logits, RNG)
    assert res.accepted == [0] and res.bonus == 2
    assert res.n_relaxed == 0 and res.regret == 0.0


def test_budget_is_spent_across_steps_and_reset_per_request():
    draft, logits = chain_case(gap=0.6)
    verifier = ASDVerifier(budget=1.0, gate=1.0, cap=2)
    assert verifier.verify(draft, logits, RNG).regret == pytest.approx(0.6)
    second = verifier.verify(draft, logits, RNG)  # 0.6 more would exceed the 0.4 left
    assert second.accepted == [0] and second.regret == 0.0
    assert verifier.spent == pytest.approx(0.6)
    verifier.reset()
    assert verifier.verify(draft, logits, RNG).accepted == [0, 1, 2, 3]


def test_cap_limits_mismatches_per_block():
    logits = rows((6, {1: 0.2}), (6, {2: 0.2}), (6, {3: 0.2}), (6, {}))
    draft = Draft.chain([1, 2, 3])  # three cheap mismatches
    for cap, accepted in [(1, [0]), (2, [0, 1]), (3, [0, 1, 2])]:
        res = ASDVerifier(budget=8, gate=1.0, cap=cap).verify(draft, logits, RNG)
        assert res.accepted == accepted and res.n_relaxed == cap
        assert res.bonus == 6


@pytest.mark.parametrize("settings", [{"budget": 0}, {"gate": 0}, {"cap": 0}])
def test_zero_setting_is_strict_greedy(settings):
    gen = torch.Generator().manual_seed(1)
    for _ in range(100):
        n = int(torch.randint(1, 9, (), generator=gen))
        parents = [int(torch.randint(-1, i, (), generator=gen)) for i in range(n)]
        tokens = torch.randint(0, 3, (n,), generator=gen).tolist()  # many near-misses and ties
        logits = torch.randn(n + 1, 3, generator=gen).round(decimals=1)
        draft = tree(tokens, parents)
        got = ASDVerifier(**{"budget": 8, "gate": 1, "cap": 2, **settings}).verify(
            draft, logits, RNG
        )
        want = GreedyVerifier().verify(draft, logits, RNG)
        assert (got.accepted, got.bonus, got.n_relaxed, got.regret) == (
            want.accepted,
            want.bonus,
            0,
            0.0,
        )


def test_empty_draft_is_argmax():
    logits = rows((3, {}))
    res = ASDVerifier().verify(Draft.empty(), logits, RNG)
    assert res.accepted == [] and res.bonus == 3


# --- the verifier on trees ----------------------------------------------------------------


def test_tree_prefers_longest_feasible_path():
    """Path A matches one token then hits an expensive mismatch; path B relaxes once, cheaply,
    and then matches twice more: B is longer and wins, and only B's regret is charged."""
    # nodes: 0 (tok 1) -> 1 (tok 4, expensive); 2 (tok 2, cheap mismatch) -> 3 (tok 5) -> 4 (tok 6)
    draft = tree([1, 4, 2, 5, 6], [-1, 0, -1, 2, 3])
    logits = rows(
        (1, {2: 0.3}),  # after root: argmax 1, token 2 costs 0.3
        (3, {4: 4.0}),  # after node 0: argmax 3, token 4 costs 4
        (0, {}),  # after node 1
        (5, {}),  # after node 2
        (6, {}),  # after node 3
        (7, {}),  # after node 4
    )
    verifier = ASDVerifier(budget=8, gate=0.25, cap=2)
    res = verifier.verify(draft, logits, RNG)
    assert res.accepted == [2, 3, 4] and res.bonus == 7
    assert res.n_relaxed == 1 and res.regret == pytest.approx(0.3)
    assert verifier.spent == pytest.approx(0.3)


def test_tree_tie_prefers_fewer_relaxed_then_first_node():
    # two depth-1 paths: node 0 is a cheap mismatch, node 1 the exact match; then a duplicate
    draft = tree([2, 1, 1], [-1, -1, -1])
    logits = rows((1, {2: 0.1}), (0, {}), (4, {}), (5, {}))
    res = ASDVerifier(budget=8, gate=1, cap=2).verify(draft, logits, RNG)
    assert res.accepted == [1] and res.bonus == 4 and res.n_relaxed == 0


def test_tree_gate_uses_each_paths_length():
    """Node 0 (regret 0.6, g = 0.25) is shared by a 2-token and a 3-token path: the gate fails
    with K - 0 = 2 and passes with K - 0 = 3, so only the long path can accept it."""
    logits = rows((1, {2: 0.6}), (0, {5: 9.0, 3: 9.0}), (0, {}), (0, {}), (0, {}))
    verifier = ASDVerifier(budget=8, gate=0.25, cap=2)
    res = verifier.verify(tree([2, 5, 3, 4], [-1, 0, 0, 2]), logits, RNG)
    assert res.accepted == [0] and res.bonus == 0 and res.regret == pytest.approx(0.6)
    short = verifier.verify(tree([2, 5], [-1, 0]), logits[:3], RNG)
    assert short.accepted == [] and short.bonus == 1


def test_tree_without_affordable_mismatch_equals_greedy():
    """Random trees with duplicate siblings and no ties: the per-path scan and its tie-breaking
    pick exactly strict greedy's path when no mismatch passes the gate."""
    gen = torch.Generator().manual_seed(2)
    for _ in range(300):
        n = int(torch.randint(1, 10, (), generator=gen))
        parents = [int(torch.randint(-1, i, (), generator=gen)) for i in range(n)]
        tokens = torch.randint(0, 3, (n,), generator=gen).tolist()
        logits = torch.randn(n + 1, 3, generator=gen, dtype=torch.float64)
        draft = tree(tokens, parents)
        got = ASDVerifier(budget=8, gate=1e-9, cap=2).verify(draft, logits, RNG)
        want = GreedyVerifier().verify(draft, logits, RNG)
        assert (got.accepted, got.bonus, got.n_relaxed) == (want.accepted, want.bonus, 0)


# --- configs ------------------------------------------------------------------------------


def test_config_instantiates(compose_cfg):
    cfg = compose_cfg("verifier=asd", "verifier.budget=2", "verifier.suffix_values=normalized")
    verifier = instantiate(cfg.verifier)
    assert isinstance(verifier, ASDVerifier) and not verifier.lossless
    assert (verifier.budget, verifier.gate, verifier.cap) == (2.0, 0.25, 2)
    assert verifier.suffix_values == "normalized"


def test_sweep_grid_composes_and_every_point_instantiates(compose_cfg):
    grid = OmegaConf.load(CONF_DIR / "sweep" / "asd_grid.yaml")
    params = grid.hydra.sweeper.params
    assert grid.hydra.mode == "MULTIRUN" and params.verifier == "asd"
    axes = {k: str(v).split(",") for k, v in params.items() if k != "verifier"}
    assert set(axes) == {"verifier.budget", "verifier.gate", "verifier.cap"}
    assert axes["verifier.budget"][0] == "0"  # the strict-greedy control is in the grid
    base = compose_cfg("verifier=asd").verifier
    for point in itertools.product(*axes.values()):
        overrides = [f"{k}={v}" for k, v in zip(axes, point, strict=True)]
        verifier = instantiate(OmegaConf.merge(base, OmegaConf.from_dotlist(overrides).verifier))
        assert verifier.strict == (verifier.budget == 0)
    cfg = compose_cfg("verifier=asd", *overrides)  # one full composition through Hydra
    assert instantiate(cfg.verifier).cap == int(point[-1])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_logits_match_cpu():
    draft = tree([2, 5, 3, 4], [-1, 0, 0, 2])
    logits = rows((1, {2: 0.6}), (0, {5: 9.0, 3: 0.1}), (0, {}), (4, {}), (0, {}))
    got = [ASDVerifier(gate=0.5).verify(draft, logits.to(d), RNG) for d in ("cpu", "cuda")]
    assert got[0] == got[1] and got[0].n_relaxed == 2
