"""Memory tiers for training (issue 31 item 5): optimizer / params / activations offloaded to
host DRAM or NVMe (archsim/offload.py, docs/cluster.md "Memory tiers")."""

from __future__ import annotations

import pytest

from archsim.arch.cluster import find_cluster, load_cluster
from archsim.cli import main
from archsim.offload import CPU_ADAM_BYTES_PER_PARAM, Offload, offload_pipeline, offload_time
from archsim.parallel import PlanOptions, evaluate_plan
from archsim.varlen import Varlen
from archsim.workloads.errors import WorkloadError
from archsim.workloads.parallel import ParallelPlan

DGX1 = load_cluster(find_cluster("dgx1"))


def plan_run(off: Offload, plan: ParallelPlan | None = None, model: str = "gpt2-medium",
             batch: int = 1, seq: int = 512, cluster=DGX1):
    return evaluate_plan(cluster, model, plan or ParallelPlan(), "train", batch=batch, seq=seq,
                         options=PlanOptions(offload=off))


def test_offload_time_closed_form():
    """W = 10 GB streamed in per pass at 10 GB/s (1 s) against 0.4 s forward and 0.8 s
    backward, two microbatches: 2 x (1 - 0.4) + 2 x (1 - 0.8) = 1.6 s exposed."""
    mem = {"weights": 10e9, "grads": 0.0, "optimizer": 0.0, "activations": 0.0}
    t = offload_time(mem, Offload(("params",)), 10e9, 1e9, 0.4, 0.8, 2, 1.0)
    assert t["transfer_s"] == pytest.approx(1.6) and t["cpu_update_s"] == 0.0
    # a pass longer than its transfer hides it (per-block prefetch)
    assert offload_time(mem, Offload(("params",)), 10e9, 1e9, 1.5, 2.0, 2, 1.0)[
        "transfer_s"] == 0.0


def test_optimizer_offload_closed_form():
    """P = 1e9 parameters' state (12 GB): gradients 2 GB down after the last backward, 2 GB of
    weights up before the first forward, at 4 GB/s against 0.1 s passes: (0.5 - 0.1) x 2;
    the CPU update streams 28 B/param through 100 GB/s of host DRAM: 0.28 s."""
    mem = {"weights": 2e9, "grads": 2e9, "optimizer": 12e9, "activations": 1e9}
    t = offload_time(mem, Offload(("optimizer",)), 4e9, 100e9, 0.1, 0.1, 3, 1.0)
    assert t["transfer_s"] == pytest.approx(2 * (0.5 - 0.1))
    assert CPU_ADAM_BYTES_PER_PARAM == 28
    assert t["cpu_update_s"] == pytest.approx(1e9 * 28 / 100e9)


def test_memory_saved_is_the_closed_form():
    """gpt2-medium has 24 blocks: optimizer offload frees the optimizer state and all but
    2/24 of the gradients; params offload all but 2/24 of the weights."""
    base = plan_run(Offload())
    m0 = base.memory_bytes
    r = plan_run(Offload(("optimizer",)))
    assert r.memory_bytes["optimizer"] == 0.0
    assert m0["total"] - r.memory_bytes["total"] == pytest.approx(
        m0["optimizer"] + m0["grads"] * (1 - 2 / 24))
    r = plan_run(Offload(("params",)))
    assert m0["total"] - r.memory_bytes["total"] == pytest.approx(m0["weights"] * (1 - 2 / 24))
    r = plan_run(Offload(("activations",)))      # one microbatch in flight
    assert r.memory_bytes["activations"] == pytest.approx(m0["activations"] * 2 / 24)


def test_params_offload_exposes_the_transfer_beyond_the_compute():
    """One device, one microbatch, 1 GB/s: each forward and backward streams the weights W
    (W / B = seconds, far above the passes), so exposed = 2 W / B - (t_f + t_b) and the step
    grows by exactly that."""
    base = plan_run(Offload())
    r = plan_run(Offload(("params",), gbps=1.0))
    w = base.memory_bytes["weights"]
    compute = base.breakdown_s["compute"]
    assert r.breakdown_s["offload"] == pytest.approx(2 * w / 1e9 - compute, rel=1e-9)
    assert r.step_s - base.step_s == pytest.approx(r.breakdown_s["offload"], rel=1e-9)


def test_fast_tier_hides_streamed_transfers():
    base = plan_run(Offload())
    r = plan_run(Offload(("params", "activations"), gbps=1e6))
    assert r.breakdown_s["offload"] == 0.0 and r.step_s == pytest.approx(base.step_s)


@pytest.mark.parametrize("kinds", [("optimizer",), ("params",), ("activations",),
                                   ("optimizer", "params", "activations")])
def test_offload_never_speeds_up_nor_grows_memory(kinds):
    base = plan_run(Offload(), batch=2, plan=ParallelPlan(microbatches=2))
    r = plan_run(Offload(kinds), batch=2, plan=ParallelPlan(microbatches=2))
    assert r.memory_bytes["total"] < base.memory_bytes["total"]
    assert r.step_s >= base.step_s - base.breakdown_s["optimizer"]   # the GPU update may go


def test_nvme_tier_is_the_slower_of_link_and_drives():
    """dgx1: host link 7.88 x 0.8 = 6.3 GB/s, NVMe 0.5 GB/s per GPU: nvme streams at 0.5."""
    host = plan_run(Offload(("params",)))
    nvme = plan_run(Offload(("params",), "nvme"))
    base = plan_run(Offload())
    c = base.breakdown_s["compute"]
    w = base.memory_bytes["weights"]
    assert nvme.breakdown_s["offload"] == pytest.approx(2 * w / 0.5e9 - c, rel=1e-9)
    assert host.breakdown_s["offload"] < nvme.breakdown_s["offload"]


def test_a_model_that_does_not_fit_fits_with_offload():
    """llama2-13b on one 32 GB V100: 13e9 x 16 B of weights, gradients and Adam state do not
    fit; with the optimizer and the weights offloaded, two blocks of each stay."""
    plan = ParallelPlan(recompute="full")
    assert not plan_run(Offload(), plan, "llama2-13b").fits
    assert plan_run(Offload(("optimizer", "params")), plan, "llama2-13b").fits


def test_offload_outside_training_and_without_a_host_is_refused():
    with pytest.raises(WorkloadError, match="training"):
        evaluate_plan(DGX1, "gpt2-medium", ParallelPlan(), "prefill", batch=1, seq=128,
                      options=PlanOptions(offload=Offload(("params",))))
    h100 = load_cluster(find_cluster("dgx_h100"))
    with pytest.raises(WorkloadError, match="--offload-gbps"):
        plan_run(Offload(("params",)), cluster=h100)
    assert plan_run(Offload(("params",), gbps=50.0), cluster=h100).fits
    with pytest.raises(WorkloadError, match="dram_gbps"):
        plan_run(Offload(("optimizer",), gbps=50.0), cluster=h100)


def test_cli(capsys):
    assert main(["run", "dgx1", "--model", "gpt2-medium", "--phase", "train", "--batch", "2",
                 "--microbatches", "2", "--offload", "optimizer,activations"]) == 0
    out = capsys.readouterr().out
    assert "offload-optimizer+activations@host" in out and "offload " in out
    assert main(["plan", "dgx1", "--model", "gpt2-medium", "--devices", "8", "--top", "1",
                 "--offload", "params", "--offload-tier", "nvme"]) == 0
    assert "offload-params@nvme" in capsys.readouterr().out


@pytest.mark.parametrize("args, needle", [
    (["--offload", "optimizer", "--phase", "prefill"], "--offload: offload applies to training"),
    (["--offload-tier", "nvme", "--phase", "train"], "--offload-tier: applies only with --offload"),
    (["--offload", "weights", "--phase", "train"], "unknown offload 'weights'"),
])
def test_cli_bad_input_exits_2(capsys, args, needle):
    try:
        code = main(["run", "dgx1", "--model", "gpt2-medium", "--dp", "2", "--batch", "2",
                     *args])
    except SystemExit as exc:            # argparse: a bad --offload value
        code = int(exc.code or 0)
    assert code == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_offload_pipeline_closed_form():
    """Two stages, two microbatches, t_f = 1, t_b = 2; the offload exposes 3 s on the first
    forward and 1 s on each backward: f = (4, 1), b = (3, 3). Flow shop: sum_j (f_j + b_j) +
    (p - 1)(max f + max b) = 11 + (4 + 3) = 18 s, where the transfer added once to the
    unstretched pipeline gives (2 + 1)(1 + 2) + 5 = 14 s. Exposures of 2 s on both forwards:
    (3 + 2) + (3 + 2) + (3 + 2) = 15 s against 9 + 4 = 13 s."""
    assert offload_pipeline(1.0, 2.0, [3.0, 0.0], [1.0, 1.0], 2) == pytest.approx(18.0)
    assert offload_pipeline(1.0, 2.0, [2.0, 2.0], [0.0, 0.0], 2) == pytest.approx(15.0)
    # one stage: the transfer is added once, m (t_f + t_b) + sum of the exposures
    assert offload_pipeline(1.0, 2.0, [2.0, 2.0], [0.0, 1.0], 1) == pytest.approx(6 + 5)


def test_offload_stretches_a_two_stage_pipeline():
    """gpt2-medium over 2 stages, 2 microbatches, weights streamed at 0.01 GB/s: every
    forward and backward pass takes W / B (far above its compute), so the 1F1B step is
    (m + p - 1) x 2 W / B plus the update; the old rule (the unstretched pipeline plus the
    transfer once) is (m + p - 1)(t_f + t_b) + m (2 W / B - t_f - t_b), smaller by
    (p - 1)(2 W / B - t_f - t_b)."""
    plan = ParallelPlan(pp=2, microbatches=2)
    base = plan_run(Offload(), plan, batch=2)
    r = plan_run(Offload(("params",), gbps=0.01), plan, batch=2)
    w = base.memory_bytes["weights"]
    b = 0.01e9
    upd = base.breakdown_s["optimizer"]
    assert r.step_s == pytest.approx(upd + 3 * 2 * w / b, rel=1e-9)
    pipe0 = base.step_s - upd                      # (m + p - 1)(t_f + t_b)
    once = base.step_s + 2 * (2 * w / b - pipe0 / 3)     # the transfer added once
    assert r.step_s - once == pytest.approx(2 * w / b - pipe0 / 3, rel=1e-6)
    assert r.step_s - base.step_s == pytest.approx(r.breakdown_s["offload"], rel=1e-9)


def test_offload_stretches_pipelines_with_documents_too():
    """With documents (unequal microbatches) the exposures join the same flow shop: the step
    grows by the offload row and the breakdown still sums to the step."""
    plan = ParallelPlan(pp=2, microbatches=2)
    v = Varlen((256, 256, 512, 1024), "fixed", "zigzag", 0)
    base = evaluate_plan(DGX1, "gpt2-medium", plan, "train", batch=2, seq=1024,
                         options=PlanOptions(varlen=v))
    r = evaluate_plan(DGX1, "gpt2-medium", plan, "train", batch=2, seq=1024,
                      options=PlanOptions(varlen=v, offload=Offload(("params",), gbps=0.01)))
    assert r.step_s > base.step_s
    assert r.step_s - base.step_s == pytest.approx(r.breakdown_s["offload"], rel=1e-9)
    assert sum(r.breakdown_s.values()) == pytest.approx(r.step_s, rel=1e-9)
