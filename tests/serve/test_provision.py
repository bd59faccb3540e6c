"""Provisioning search (issue 31, item 7): the best of an enumerated space within the budget.

Properties: the search returns the deployment with the highest goodput among those within
the cost and power budgets, computed here independently over the same enumeration; every
deployment over a budget is excluded (the over-cost ones before they are simulated); the
frontier is Pareto (no point beaten on both cost and goodput). A stub serving simulation
with a known goodput per deployment keeps it exact and fast; one small real run checks the
wiring through ``run_serving``'s disaggregation.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.cli import main
from archsim.serve.provision import provision
from archsim.workloads.errors import ConfigError

PRICES = {"fast": 5.0, "slow": 2.0}
SPEED = {"fast": 3.0, "slow": 1.0}


def _stub(calls: list[tuple]):
    def serve(design, model, *, replicas, tp, decode_design, decode_replicas, decode_tp, slo,
              **_):
        calls.append((design, replicas, tp, decode_design, decode_replicas, decode_tp))
        # a made-up but deterministic goodput: min of the pools' capacities, and a power
        good = min(SPEED[design] * replicas * tp, 0.7 * SPEED[decode_design] * decode_replicas
                   * decode_tp)
        power = 300.0 * (replicas * tp + decode_replicas * decode_tp)
        return SimpleNamespace(result=SimpleNamespace(goodput_rps=good, avg_power_w=power,
                                                      slo_attainment=1.0), capacity_rps=None)
    return serve


@settings(max_examples=25, deadline=None, derandomize=True)
@given(max_cost=st.one_of(st.none(), st.floats(2, 40)),
       max_power=st.one_of(st.none(), st.floats(500, 3000)))
def test_best_of_the_enumerated_space_within_budget(max_cost, max_power):
    calls: list[tuple] = []
    found = provision("m", ("fast", "slow"), ("fast", "slow"), prices=PRICES,
                      replicas=(1, 2), decode_replicas=(1, 2, 3), tp=(1, 2),
                      max_cost_per_hour=max_cost, max_power_w=max_power, serve=_stub(calls))
    space = list(itertools.product(("fast", "slow"), (1, 2), (1, 2), ("fast", "slow"),
                                   (1, 2, 3), (1, 2)))
    assert found.tried == len(space) == 96

    def cost(p):
        return p[1] * p[2] * PRICES[p[0]] + p[4] * p[5] * PRICES[p[3]]

    def good(p):
        return min(SPEED[p[0]] * p[1] * p[2], 0.7 * SPEED[p[3]] * p[4] * p[5])

    def power(p):
        return 300.0 * (p[1] * p[2] + p[4] * p[5])

    ok = [p for p in space if (max_cost is None or cost(p) <= max_cost)
          and (max_power is None or power(p) <= max_power)]
    # over-cost points are never simulated
    assert all(max_cost is None or cost(c) <= max_cost for c in calls)
    assert len(found.ranked) == len(ok)
    assert len(found.excluded) == len(space) - len(ok)
    if not ok:
        assert found.best is None
        return
    best_good = max(good(p) for p in ok)
    best_cost = min(cost(p) for p in ok if good(p) == best_good)
    assert found.best.goodput_rps == pytest.approx(best_good)
    assert found.best.cost_per_hour == pytest.approx(best_cost)
    for p in found.ranked:
        assert max_cost is None or p.cost_per_hour <= max_cost
        assert max_power is None or p.power_w <= max_power
    front = found.frontier
    for f in front:     # Pareto: nothing cheaper-or-equal serves more
        assert not any(q.cost_per_hour <= f.cost_per_hour and q.goodput_rps > f.goodput_rps
                       for q in found.ranked)
    assert front[-1].goodput_rps == pytest.approx(best_good)


def test_refusals_name_the_flag():
    with pytest.raises(ConfigError, match="--price.*slow"):
        provision("m", ("fast",), ("slow",), prices={"fast": 1.0}, serve=_stub([]))
    with pytest.raises(ConfigError, match="--max-cost"):
        provision("m", ("fast",), ("fast",), prices=PRICES, max_cost_per_hour=0,
                  serve=_stub([]))
    with pytest.raises(ConfigError, match="--decode-replicas"):
        provision("m", ("fast",), ("fast",), prices=PRICES, decode_replicas=(0,),
                  serve=_stub([]))


@pytest.mark.parametrize("args", [
    ["provision", "gpt2-small", "--prefill-designs", "h100", "--decode-designs", "a100",
     "--price", "h100=4"],
    ["provision", "gpt2-small", "--prefill-designs", "h100", "--decode-designs", "h100",
     "--price", "h100=x"],
    ["provision", "gpt2-small", "--prefill-designs", "h100", "--decode-designs", "h100",
     "--price", "h100=4", "--replicas", "0"],
])
def test_cli_bad_input_exit_2(capsys, args):
    try:
        code = main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1


def test_real_disaggregated_runs():
    """Two designs, one count each: four real serving simulations; the cost budget leaves
    out the two-H100 deployment before it runs."""
    found = provision("gpt2-small", ("h100", "a100"), ("h100", "a100"),
                      prices={"h100": 4.0, "a100": 2.0}, replicas=(1,), decode_replicas=(1,),
                      max_cost_per_hour=7.0, rate=2.0, duration=5.0, prompt="128",
                      output="16")
    assert found.tried == 4
    assert [p.label() for p in found.excluded] == ["prefill 1x h100 + decode 1x h100"]
    assert len(found.ranked) == 3
    assert all(p.result is not None and p.result.devices == 2 for p in found.ranked)
    assert found.best.goodput_rps > 0
