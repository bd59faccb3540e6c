"""Plans searched for energy, cost and goodput over power caps and device counts (issue 27,
item 5): the energy of a step as devices x (busy energy + static power x waiting) + links, the
power cap's trade of time for energy, the objectives' rankings, and their bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import archsim
from archsim.arch.cluster import load_cluster
from archsim.cli import main
from archsim.parallel import PlanOptions, evaluate_plan, power_capped
from archsim.workloads.errors import ConfigError
from archsim.workloads.parallel import ParallelPlan
from archsim.workloads.tags import ATTENTION_CORE_ROLES

ROOT = Path(__file__).resolve().parents[2]
CFG = ROOT / "configs" / "cluster"
#: the H100 board's idle power and limit, read from its YAML (not from the model)
H100 = yaml.safe_load((ROOT / "configs" / "gpu" / "h100.yaml").read_text())["units"][0]
STATIC_W, LIMIT_W = H100["static_power_w"], H100["power"]["power_limit_w"]


@pytest.fixture(scope="module")
def dgx():
    return load_cluster(CFG / "dgx_h100.yaml")


@pytest.fixture(scope="module")
def memo():
    return {}


# --- energy of a step ---------------------------------------------------------------------------
@pytest.mark.parametrize("plan, phase, kw", [
    (ParallelPlan(tp=2, pp=4, microbatches=4), "decode", {"batch": 4, "context": 1024}),
    (ParallelPlan(tp=4, pp=2, microbatches=2), "prefill", {"batch": 2, "seq": 1024}),
    (ParallelPlan(tp=2, pp=2, dp=2, microbatches=4, zero=1), "train", {"batch": 8, "seq": 512}),
])
def test_energy_is_devices_times_busy_plus_waiting(dgx, memo, plan, phase, kw):
    r = evaluate_plan(dgx, "llama3-8b", plan, phase, memo=memo, **kw)
    b = r.breakdown_s
    # a device computes for compute + optimizer and waits the rest of the step: the bubble and
    # every exposed collective (the breakdown's other parts, which sum to the step)
    assert r.busy_s == pytest.approx(b["compute"] + b["optimizer"], rel=1e-12)
    waiting = sum(v for k, v in b.items() if k not in ("compute", "optimizer"))
    assert r.step_s - r.busy_s == pytest.approx(waiting, rel=1e-9)
    assert waiting >= b["bubble"] > 0        # a pipeline of m >= p still has (p-1) t idle
    # while it waits a device draws the board's idle power (134.903 W measured, configs/gpu)
    assert r.idle_power_w == pytest.approx(STATIC_W, rel=1e-12)
    # sum over devices of the integral of power: busy energy + static x waiting, plus links
    assert r.energy_j == pytest.approx(
        r.plan.devices * (r.busy_energy_j + STATIC_W * waiting) + r.link_energy_j, rel=1e-12)
    # busy, a board draws at least its idle power and at most its limit
    assert STATIC_W * r.busy_s <= r.busy_energy_j <= LIMIT_W * r.busy_s
    assert r.link_energy_j > 0                   # NVLink energy per bit (1.3 pJ/bit)


def test_waiting_devices_pay_for_the_bubble(dgx, memo):
    # the same stage work (one sequence per microbatch) on 4 stages with 4 and 8 microbatches:
    # the busy energy per microbatch is the same, the bubble (p - 1) t_f is the same, so the
    # energy grows by the added microbatches' busy energy and the extra steady-state waiting
    a = evaluate_plan(dgx, "llama3-8b", ParallelPlan(pp=4, microbatches=4), "prefill",
                      batch=4, seq=512, memo=memo)
    c = evaluate_plan(dgx, "llama3-8b", ParallelPlan(pp=4, microbatches=8), "prefill",
                      batch=8, seq=512, memo=memo)
    assert c.busy_energy_j == pytest.approx(2 * a.busy_energy_j, rel=1e-12)
    assert c.breakdown_s["bubble"] == pytest.approx(a.breakdown_s["bubble"], rel=1e-9)
    idle_a = a.energy_j - 4 * a.busy_energy_j - a.link_energy_j
    assert idle_a == pytest.approx(4 * STATIC_W * (a.step_s - a.busy_s), rel=1e-9)
    assert idle_a >= 4 * STATIC_W * a.breakdown_s["bubble"]


# --- power caps ---------------------------------------------------------------------------------
def test_a_lower_cap_never_shortens_compute_bound_time(dgx, memo):
    # prefill of 4 x 2048 tokens on tp 2: GEMM-bound; caps from the limit down to 40%
    caps = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4)
    steps = [evaluate_plan(dgx, "llama3-8b", ParallelPlan(tp=2), "prefill", batch=4, seq=2048,
                           options=PlanOptions(power_cap=c), memo=memo).step_s for c in caps]
    assert all(b >= a * (1 - 1e-12) for a, b in zip(steps, steps[1:], strict=False))
    # a dense GEMM already runs power-capped at 700 W (1185-1395 MHz measured): 280 W is slower
    assert steps[-1] > 1.3 * steps[0]


def test_cap_of_one_is_the_design_and_the_cap_reaches_the_device(dgx):
    assert power_capped(dgx, 1.0) is dgx
    capped = power_capped(dgx, 0.7)
    assert capped.device.units[0].spec.power.power_limit_w == pytest.approx(0.7 * LIMIT_W)
    assert dgx.device.units[0].spec.power.power_limit_w == LIMIT_W     # not mutated


def test_memory_bound_decode_trades_little_time_for_energy(dgx, memo):
    # decode reads weights: a lower clock barely slows it and saves the clock-tree energy
    def at(c):
        return evaluate_plan(dgx, "llama3-8b", ParallelPlan(tp=2), "decode", batch=8,
                             context=2048, options=PlanOptions(power_cap=c), memo=memo)
    full, capped = at(1.0), at(0.6)
    assert capped.energy_j < full.energy_j
    assert capped.step_s >= full.step_s
    assert capped.step_s / full.step_s - 1 < 1 - capped.energy_j / full.energy_j


@pytest.mark.parametrize("fraction, words", [(0.1, "static power"), (1.5, "(0, 1]")])
def test_bad_cap_is_refused(dgx, fraction, words):
    with pytest.raises(ConfigError) as e:
        power_capped(dgx, fraction)
    assert "--power-caps" in str(e.value) and words in str(e.value)


def test_cap_on_a_design_without_dvfs_is_refused():
    a100 = load_cluster(CFG / "dgx_a100.yaml")
    with pytest.raises(ConfigError) as e:
        power_capped(a100, 0.8)
    assert "--power-caps" in str(e.value) and "no DVFS model" in str(e.value)


# --- objectives ---------------------------------------------------------------------------------
SPACE = dict(phase="decode", batch=16, context=2048, power_caps=(1.0, 0.85, 0.7, 0.5),
             fewer_devices=True)


@pytest.fixture(scope="module")
def searches():
    return {o: archsim.search_plans("dgx_h100", "llama3-8b", 8, objective=o,
                                    price_per_gpu_hour=2.5, slo_ms=8.0, **SPACE)
            for o in ("time", "energy", "cost", "goodput")}


def test_each_objective_ranks_by_its_key(searches):
    for o, key in (("time", lambda r: r.step_s), ("energy", lambda r: r.energy_j),
                   ("cost", lambda r: r.plan.devices * r.step_s)):
        vals = [key(r) for r in searches[o].ranked]
        assert vals == sorted(vals), o
    # cost = devices x step x price per device-hour
    d = searches["cost"].to_dict(top=3)
    for row in d["plans"]:
        assert row["cost_per_step"] == pytest.approx(row["devices"] * row["step_s"] / 3600 * 2.5)


def test_energy_optimal_never_costs_more_energy_than_time_optimal(searches):
    t, e = searches["time"].best, searches["energy"].best
    assert e.energy_j <= t.energy_j and e.step_s >= t.step_s
    assert searches["energy"].time_best.step_s == t.step_s
    # the space holds plans of fewer devices and capped ones, and energy differs from time
    assert {r.plan.devices for r in searches["energy"].ranked} > {8}
    assert [r.label() for r in searches["energy"].ranked[:5]] != \
        [r.label() for r in searches["time"].ranked[:5]]
    line = searches["energy"].tradeoff()
    assert line.startswith("energy-optimal ") and "time-optimal" in line and "\n" not in line


@pytest.mark.parametrize("devices, kw", [
    (4, dict(phase="prefill", batch=4, seq=1024)),
    (4, dict(phase="train", batch=8, seq=512)),
    (8, dict(phase="decode", batch=32, context=1024)),
])
def test_energy_and_time_optima_over_small_spaces(devices, kw):
    # property: over the same space, the energy-optimal plan never spends more energy than the
    # time-optimal one, and the time-optimal plan is never slower than the energy-optimal one
    space = dict(power_caps=(1.0, 0.7), fewer_devices=True, **kw)
    t = archsim.search_plans("dgx_h100", "llama3-8b", devices, objective="time", **space)
    e = archsim.search_plans("dgx_h100", "llama3-8b", devices, objective="energy", **space)
    assert e.best.energy_j <= t.best.energy_j
    assert t.best.step_s <= e.best.step_s
    assert e.best.energy_j == min(r.energy_j for r in t.ranked)


def test_more_space_never_hurts_the_objective():
    small = archsim.search_plans("dgx_h100", "llama3-8b", 8, phase="decode", batch=16,
                                 context=2048, objective="energy")
    big = archsim.search_plans("dgx_h100", "llama3-8b", 8, objective="energy", **SPACE)
    assert big.best.energy_j <= small.best.energy_j
    assert big.tried > small.tried


def test_goodput_ranks_plans_that_meet_the_slo_first(searches):
    g = searches["goodput"]
    met = [r for r in g.ranked if g.meets_slo(r)]
    assert met and all(r.step_s <= 8e-3 for r in met)
    assert list(g.ranked[:len(met)]) == met            # every miss ranks after every hit
    rates = [r.tokens_per_s / r.plan.devices for r in met]
    assert rates == sorted(rates, reverse=True)
    assert g.goodput(g.best) == pytest.approx(16 / g.best.step_s / g.best.plan.devices)


@pytest.mark.parametrize("objective", ["time", "energy", "cost", "goodput"])
def test_one_candidate_is_the_answer(dgx, objective):
    # one device, decode, batch 1: one plan; every objective returns it as evaluate_plan does
    found = archsim.search_plans("dgx_h100", "llama3-8b", 1, phase="decode", batch=1,
                                 context=512, objective=objective, price_per_gpu_hour=2.0,
                                 slo_ms=1e3)
    assert found.tried == 1 and len(found.ranked) == 1
    r = evaluate_plan(dgx, "llama3-8b", ParallelPlan(), "decode", batch=1, context=512)
    assert found.best.step_s == r.step_s and found.best.energy_j == r.energy_j


# --- command line -------------------------------------------------------------------------------
def test_plan_energy_prints_the_time_it_costs(capsys):
    assert main(["plan", "dgx_h100", "--model", "llama3-8b", "--devices", "8", "--phase",
                 "decode", "--batch", "16", "--context", "2048", "--objective", "energy",
                 "--power-caps", "100%,70%", "--fewer-devices", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert sum(line.startswith("energy-optimal ") for line in out.splitlines()) == 1
    assert "power caps 100%, 70%" in out and "by energy" in out


def test_plan_cost_json(capsys):
    assert main(["plan", "dgx_h100", "--model", "llama3-8b", "--devices", "8", "--phase",
                 "decode", "--batch", "16", "--objective", "cost", "--price-per-gpu-hour",
                 "2.5", "--fewer-devices", "--top", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["objective"] == "cost" and d["price_per_gpu_hour"] == 2.5
    assert d["device_counts"] == [1, 2, 4, 8]
    t = d["time_optimal"]
    assert t["step_s"] <= d["plans"][0]["step_s"]
    assert t["cost_per_step"] >= d["plans"][0]["cost_per_step"]


@pytest.mark.parametrize("extra, flag", [
    (["--objective", "cost"], "--price-per-gpu-hour"),
    (["--objective", "goodput"], "--slo-ms"),
    (["--objective", "goodput", "--slo-ms", "5", "--phase", "train"], "--objective"),
    (["--power-caps", "0"], "--power-caps"),
    (["--power-caps", "120%"], "--power-caps"),
    (["--power-caps", "1,x"], "--power-caps"),
    (["--price-per-gpu-hour", "-1"], "--price-per-gpu-hour"),
    (["--slo-ms", "0"], "--slo-ms"),
])
def test_bad_objective_inputs_exit_2_naming_the_flag(capsys, extra, flag):
    argv = ["plan", "dgx_h100", "--model", "llama3-8b", "--devices", "8", "--phase", "decode",
            *extra]
    try:
        rc = main(argv)
    except SystemExit as e:           # argparse's own usage errors
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err
    assert flag in err and len(err.strip().splitlines()) <= 2


def test_power_cap_on_a100_exits_2(capsys):
    assert main(["plan", "dgx_a100", "--model", "llama3-8b", "--devices", "8", "--phase",
                 "decode", "--power-caps", "100%,80%"]) == 2
    assert "--power-caps" in capsys.readouterr().err


def test_the_update_is_paid_once_per_step_and_split_by_zero(dgx, memo):
    # one device, micro-batches of one sequence: m = 1 and m = 2 differ by one microbatch's
    # passes, so 2 E(1) - E(2) is the optimizer update alone, which must be the energy of the
    # optimizer ops of the whole model as one device runs it (archsim.evaluate, fused attention
    # as H100 runs it); with ZeRO-1 over dp 2 each device updates half
    def busy(m, **kw):
        return evaluate_plan(dgx, "llama3-8b", ParallelPlan(microbatches=m, **kw), "train",
                             batch=m * kw.get("dp", 1), seq=512, memo=memo).busy_energy_j
    e1, e2 = busy(1), busy(2)
    wl = archsim.workload("llama3-8b", "train", batch=1, seq=512, attention="fused")
    res = archsim.evaluate(dgx.device, wl)
    e_upd = sum(o.energy_j for o in res.ops if o.pass_group == "optimizer")
    assert e_upd > 0
    assert 2 * e1 - e2 == pytest.approx(e_upd, rel=1e-9)
    z = busy(1, dp=2, zero=1)
    assert e1 - z == pytest.approx(e_upd / 2, rel=1e-9)


def test_recomputation_costs_its_forward_energy(dgx, memo):
    # full recompute runs every block's forward again, selective the attention core's (roles
    # qk/attn/av or the fused attention): per microbatch, the energy of those forward ops of
    # the whole model as one device runs it (archsim.evaluate); the embedding and head are not
    # recomputed
    def at(rc):
        return evaluate_plan(dgx, "llama3-8b", ParallelPlan(microbatches=2, recompute=rc),
                             "train", batch=2, seq=512, memo=memo)
    none, sel, full = at("none"), at("selective"), at("full")
    wl = archsim.workload("llama3-8b", "train", batch=1, seq=512, attention="fused")
    fwd = [o for o in archsim.evaluate(dgx.device, wl).ops
           if o.pass_group == "forward" and o.block is not None]
    e_fwd = sum(o.energy_j for o in fwd)
    e_core = sum(o.energy_j for o in fwd if o.role in ATTENTION_CORE_ROLES)
    assert 0 < e_core < e_fwd
    assert full.busy_energy_j - none.busy_energy_j == pytest.approx(2 * e_fwd, rel=1e-9)
    assert sel.busy_energy_j - none.busy_energy_j == pytest.approx(2 * e_core, rel=1e-9)


def test_run_with_a_power_cap_is_the_searched_plan(capsys, dgx):
    # the plan the energy search returns can be run as it was priced
    assert main(["run", "dgx_h100", "--model", "llama3-8b", "--phase", "decode", "--tp", "2",
                 "--batch", "8", "--context", "2048", "--power-cap", "60%", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    r = evaluate_plan(dgx, "llama3-8b", ParallelPlan(tp=2), "decode", batch=8, context=2048,
                      options=PlanOptions(power_cap=0.6))
    assert d["energy_j"] == pytest.approx(r.energy_j, rel=1e-12)
    assert d["latency_s"] == pytest.approx(r.step_s, rel=1e-12)
    assert d["extra"]["plan"]["power_cap"] == 0.6
    parts = d["energy_breakdown_j"]
    assert sum(parts.values()) == pytest.approx(d["energy_j"], rel=1e-12)
    assert parts["devices_waiting"] == pytest.approx(2 * STATIC_W * (r.step_s - r.busy_s))


def test_run_power_cap_on_a100_exits_2_naming_the_flag(capsys):
    assert main(["run", "dgx_a100", "--model", "llama3-8b", "--phase", "decode", "--tp", "2",
                 "--power-cap", "70%"]) == 2
    err = capsys.readouterr().err
    assert "--power-cap:" in err and "no DVFS model" in err
