"""The H100 model against measured silicon, fitted on one half and checked on the other.

Data: ``tests/data/silicon/`` (copied from ``shared/reference/silicon/h100.jsonl``, tag M;
how each row was measured: ``tests/data/silicon/SOURCE.md``). The split is by kernel class /
shape family, never at random:

* ``h100_calibration.jsonl``: idle power; the sustained bf16 GEMM 4096^3 and 16384^3 and
  1 GiB copy energy rows (power constants, MMA efficiency); int8 GEMMs 4096^3 and 16384^3
  (the int8 library rate); ResNet-50 batch 1 eager wall time (the eager host cost); the
  65536 x 4096 softmax (the re-read pass rate of multi-pass softmax).
* ``h100_heldout.jsonl``: every other row: all bf16/fp16/fp8 latency shapes, GEMV and small-M,
  bmm, attention, the other vector rows (incl. the 2048 x 4096 softmax, which fits in L2),
  copy, the fp8 and GEMV energy rows, ResNet-50 batch 32/256 and
  training, the GPT-2 training step.

Targets are issue 16's: class median |error| <= 10%, energy per call <= 15%, sustained SM
clock within 10%.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from archsim import silicon
from archsim.api import load
from archsim.arch.gpu.power import PowerSpec, board_power_w, solve_clock
from tests.gpu.gpu_helpers import gpu

DATA = Path(__file__).resolve().parents[1] / "data" / "silicon"
CAL = silicon.load_rows(DATA / "h100_calibration.jsonl")
HELD = silicon.load_rows(DATA / "h100_heldout.jsonl")


@cache
def _held_scores() -> dict[str, silicon.ClassScore]:
    return silicon.score(gpu("h100"), HELD)


def _energy_rows(rows: list[silicon.Row]) -> list[silicon.Row]:
    return [r for r in rows if r.kind == "energy" and silicon.row_op(r.data) is not None]


def test_split_is_by_family_and_disjoint() -> None:
    cal = {r.data.get("kind") + str(sorted(r.data.items())) for r in CAL if r.kind != "device"}
    held = {r.data.get("kind") + str(sorted(r.data.items())) for r in HELD if r.kind != "device"}
    assert not cal & held
    # the held-out half has no bf16 energy row and no int8 GEMM at 4096^3 / 16384^3
    assert all(r.data.get("dtype") != "bf16" or r.data.get("m") == 1 for r in _energy_rows(HELD))
    assert not [r for r in HELD if r.kind == "gemm" and r.data["dtype"] == "int8"
                and r.data["m"] >= 4096]


def test_config_power_constants_are_the_calibration_fit() -> None:
    """configs/gpu/h100.yaml holds what `archsim calibrate` fits on the calibration half
    (reproducible), and the fit's residuals are small (two constants, three rows)."""
    u = gpu("h100")
    idle = next(float(r.data["avg_w"]) for r in CAL if r.data.get("op") == "idle")
    fit = silicon.fit_power(u, _energy_rows(CAL), idle)
    p = u.spec.power
    assert p is not None
    assert fit.active_pj_per_cycle == pytest.approx(p.active_pj_per_cycle, rel=1e-4)
    assert fit.core_energy_scale == pytest.approx(p.core_energy_scale, rel=1e-4)
    assert max(abs(res) for _, res in fit.residuals) < 0.05


def test_softmax_pass_rate_fitted_on_large_checks_small() -> None:
    """Split by size: the re-read pass rate of a multi-pass softmax is fitted on the 512 MB
    (HBM-resident) 65536 x 4096 row and predicts the held-out 16 MB (L2-resident) 2048 x 4096
    row within 5% -- the claim under test is that the passes are issue-bound, not bandwidth-
    bound, so L2 residency does not speed them up (the old L2 model was 46% fast there). The
    H100 now prices these register-path rows with its own model (test_vector_widths.py: +2.4 %
    on this row); the rate stays the fallback of GPUs without it and the shared-memory path."""
    u = gpu("h100")
    rate = silicon.fit_reduce_pass_rate(u, CAL)
    assert rate == pytest.approx(u.spec.cuda_core.reduce_pass_bytes_per_clock, rel=1e-3)
    small = next(r.data for r in HELD if r.data.get("op") == "softmax")
    assert small["rows"] == 2048
    pred = silicon.predict_ms(u, small)
    assert pred == pytest.approx(float(small["ms"]), rel=0.05)
    old = type(u)(u.name, replace(u.spec, cuda_core=replace(
        u.spec.cuda_core, reduce_pass_bytes_per_clock=None, softmax_reg_row_ns=None,
        softmax_reg_elem_ns=None)), u.node_nm)
    assert silicon.predict_ms(old, small) < 0.6 * float(small["ms"])


@pytest.mark.parametrize("cls", ["gemm_bf16", "gemm_fp16", "gemm_small_m", "gemm_fp8", "bmm",
                                 "attention", "vector", "copy"])
def test_heldout_latency_per_class(cls: str) -> None:
    """Held-out kernels: class median |error| <= 10% (issue 16 "Must show")."""
    sc = _held_scores()[cls]
    assert sc.median_abs <= 0.10, (cls, sorted(round(e, 3) for e in sc.errors))


def test_heldout_energy_and_clock() -> None:
    """Held-out energy rows (fp8 GEMM 8192^3: another format; GEMV: memory-bound): board
    energy per call within 15% and the sustained SM clock within 10%."""
    acc = load("gpu/h100")
    rows = _energy_rows(HELD)
    assert {silicon._label(r.data) for r in rows} == {"gemm 8192x8192x8192 fp8",
                                                       "gemm 1x8192x8192 bf16"}
    for r in rows:
        pred = silicon.energy_prediction(acc, r.data)
        assert pred is not None
        mj, _, mhz = pred
        assert mj == pytest.approx(r.data["mj_per_call"], rel=0.15)
        assert mhz == pytest.approx(r.data["sm_mhz"], rel=0.10)


def test_calibration_energy_rows_also_fit() -> None:
    """The fitted rows themselves (bf16 GEMMs at 1395 / 1245 MHz, copy at 1980 MHz): the
    clock now comes out of the power model (not the fit input) and must land within 10%."""
    acc = load("gpu/h100")
    for r in _energy_rows(CAL):
        pred = silicon.energy_prediction(acc, r.data)
        assert pred is not None
        assert pred[0] == pytest.approx(r.data["mj_per_call"], rel=0.15)
        assert pred[2] == pytest.approx(r.data["sm_mhz"], rel=0.10)


def test_overfit_constants_would_fail_heldout() -> None:
    """Held-out discipline: a power fit on the copy alone (one memory-bound row) cannot say
    what a dense GEMM costs; its core scale stays at the prior and the held-out fp8 clock
    leaves the 10% band. (Guards against a test that cannot fail.)"""
    u = gpu("h100")
    copy_only = [r for r in _energy_rows(CAL) if r.data.get("op") == "copy"]
    fit = silicon.fit_power(u, copy_only, 134.9)
    p = u.spec.power
    assert p is not None
    bad = replace(u.spec, power=replace(p, active_pj_per_cycle=fit.active_pj_per_cycle,
                                        core_energy_scale=1.0))
    bad_u = type(u)(u.name, bad, u.node_nm)
    fp8 = next(r for r in _energy_rows(HELD) if r.data["dtype"] == "fp8")
    op = silicon.row_op(fp8.data)
    assert op is not None
    mhz = bad_u.estimate(op).details["clock_mhz"]
    assert abs(mhz / fp8.data["sm_mhz"] - 1) > 0.10


def test_whole_models_heldout() -> None:
    """ResNet-50 inference (batch 32, 256) and training (batch 128) and the Hugging Face
    GPT-2 small training step (kernels eager_amp: autocast's casts and fp32 ops, dropout,
    gelu_new op by op, the fp32 loss) wall times with the eager runtime (host cost fitted on
    ResNet-50 batch 1 only; nothing fitted on the training step): within 25%."""
    rows = silicon.model_rows(load("gpu/h100"), HELD)
    assert sorted(m["kind"] for m in rows) == ["cnn_infer", "cnn_infer", "cnn_train",
                                               "train_step"]
    for m in rows:
        if m["kind"] == "cnn_train":
            continue                      # a known gap: test_resnet_training_wall_gap
        assert m["wall_ms"] == pytest.approx(m["measured_ms"], rel=0.25), m


def test_resnet_training_wall_gap_is_missing_device_time() -> None:
    """ResNet-50 training's wall is a known gap (docs/validation.md): with the launch queue
    the host runs ahead, so the wall follows the device time, and the device time is short of
    the profiler's kernel sum (26.85 ms of our 2026-11-26 re-measurement: training batch norm
    reading its input twice took it from 20.6 to 23.5 ms; the rest is element-wise and pooling
    kernels, docs/gpu.md). Strict: if the device time is fixed, this test fails and the wall
    goes back to a comparison."""
    m = next(r for r in silicon.model_rows(load("gpu/h100"), HELD) if r["kind"] == "cnn_train")
    remeasured = next(r.data for r in silicon.load_rows(DATA / "h100_2026-11-26.jsonl")
                      if r.kind == "cnn_train")
    assert m["wall_ms"] < 0.8 * m["measured_ms"]
    assert m["device_ms"] < 0.9 * remeasured["kernel_ms"]


# ---- power model: closed forms ---------------------------------------------------------


def _toy_power() -> PowerSpec:
    return PowerSpec(power_limit_w=400.0, vf_mhz=(1000.0, 2000.0), vf_volts=(0.5, 1.0),
                     active_pj_per_cycle=0.0, clock_step_mhz=10.0)


def test_board_power_closed_form() -> None:
    """P = idle + (E_core (V/Vt)^2 + E_hbm) / T + e_cyc f (V/Vt)^2, T = max(t_clk ft/f, t_mem).
    At 1500 MHz: V = 0.75 V, (V/Vt)^2 = 0.5625; T = max(1 ms x 2000/1500, 0.5 ms) = 1.333 ms;
    P = 100 + (0.4 J x 0.5625 + 0.1 J) / 1.333 ms = 100 + 243.75 = 343.75 W."""
    p = _toy_power()
    pw, body = board_power_w(p, 100.0, 1500.0, 1e-3, 0.5e-3, 0.4, 0.1)
    assert body == pytest.approx(4e-3 / 3)
    assert pw == pytest.approx(100 + (0.4 * 0.5625 + 0.1) / (4e-3 / 3))


def test_solve_clock_finds_the_cap() -> None:
    """Compute-bound toy kernel: P(f) = 100 + 0.4 J (f/2000)^2 / (1 ms x 2000/f) with
    V ~ f on this curve, i.e. 100 + 400 (f/2000)^3 W. The cap 400 W gives
    f = 2000 x (300/400)^(1/3) = 1817 MHz; on the 10 MHz grid from 2000: 1810 MHz."""
    p = _toy_power()
    pt = solve_clock(p, 100.0, 1e-3, 0.0, 0.4, 0.0)
    assert pt.capped
    assert pt.clock_mhz == 1810.0
    assert pt.power_w <= 400.0
    up = board_power_w(p, 100.0, 1820.0, 1e-3, 0.0, 0.4, 0.0)[0]
    assert up > 400.0
    # memory-bound: the body does not shrink with the clock, so the top clock fits
    mem = solve_clock(p, 100.0, 0.1e-3, 1e-3, 0.05, 0.1)
    assert not mem.capped and mem.clock_mhz == 2000.0


def test_power_window_raises_the_clock() -> None:
    """Averaging with cheap work (a flush at 200 W for as long as the kernel) lets the
    kernel itself run above the cap: its clock is higher than when sustained."""
    p = _toy_power()
    alone = solve_clock(p, 100.0, 1e-3, 0.0, 0.4, 0.0)
    mixed = solve_clock(p, 100.0, 1e-3, 0.0, 0.4, 0.0, other_j=0.2 * 1e-3 * 1000 / 1000,
                        other_s=1e-3)
    assert mixed.clock_mhz > alone.clock_mhz


def test_dense_gemm_capped_memory_bound_not() -> None:
    u = gpu("h100")
    bf = silicon.FORMATS["bf16"]
    from archsim.workloads.ops import Elementwise, Gemm

    big = u.estimate(Gemm(name="g", m=8192, n=8192, k=8192, a_format=bf, w_format=bf))
    copy = u.estimate(Elementwise(name="c", rows=1 << 14, cols=1 << 15, fn="copy",
                                  a_format=bf))
    assert big.details["power_capped"] == 1.0 and big.details["clock_mhz"] < 1500
    assert big.details["power_w"] <= 700.0
    assert copy.details["power_capped"] == 0.0 and copy.details["clock_mhz"] == 1980.0


def test_energy_is_the_power_times_time() -> None:
    """The Result energy of a capped GEMM equals board power x body + idle x launch (the
    same per-action energies drive the clock and the energy report)."""
    import archsim

    acc = load("gpu/h100")
    res = archsim.evaluate(acc, archsim.gemm_workload(8192, 8192, 8192, a_format="bf16"))
    d = res.ops[0].details
    launch = acc.units[0].spec.launch_overhead_us * 1e-6
    body = res.latency_s - launch
    expect = d["power_w"] * body + acc.units[0].spec.static_power_w * launch
    assert res.energy_j == pytest.approx(expect, rel=0.01)
    assert not math.isnan(res.energy_j)
