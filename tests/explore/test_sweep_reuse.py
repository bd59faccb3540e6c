"""Sweep throughput (issue 30, item 4) without changing a number: what depends on the
workload alone is worked out once per workload (``Workload.derived``), a unit's components
once per evaluation (``energy.prices``), and a killed sweep resumes from its last committed
chunk. Every expected value here comes from a fresh computation or a closed form, never
from the cached path itself."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import archsim
from archsim import energy
from archsim.api import workload_from_dict
from archsim.arch.accelerator import load_data
from archsim.explore import parse_spec_text, run_sweep
from archsim.explore.store import ResultStore
from archsim.workloads.errors import ConfigError
from archsim.workloads.graph import Workload
from archsim.workloads.ops import Conv2d, Elementwise, Gemm
from archsim.workloads.yamlio import parse_value, read_yaml

ROOT = Path(__file__).resolve().parents[2]


# ---- the same workload object on many designs: as a fresh one on each ---------------------
POINTS = [
    ("spatial/tpu_like.yaml", ["units[0].rows=32", "units[0].cols=64"],
     dict(model="resnet50", a_format="int8", w_format="int8")),
    ("spatial/tpu_like.yaml", ["units[0].rows=128", "units[0].memory.bandwidth_gbps=150"],
     dict(model="resnet50", a_format="int8", w_format="int8")),
    ("spatial/eyeriss_like.yaml", [], dict(model="resnet18", a_format="int8", w_format="int8")),
    ("spatial/eyeriss_like.yaml", ["units[0].global_buffer_kib=216"], dict(model="resnet18", a_format="int8", w_format="int8")),
    ("gpu/h100.yaml", [], dict(model="llama3-8b", phase="decode", context=512)),
    ("gpu/h100.yaml", ["units[0].sm_count=100"],
     dict(model="llama3-8b", phase="decode", context=512)),
]


def test_warm_workload_gives_the_fresh_result():
    """A sweep worker evaluates one workload object on design after design: with the
    workload's derived values (order, signatures, reprs, resident bytes) already worked out,
    every result equals the one of a workload built afresh for that design, to the bit."""
    shared: dict[str, Workload] = {}
    for cfg, sets, wl_spec in POINTS:
        path = str(ROOT / "configs" / cfg)
        data, _ = read_yaml(path, ConfigError)
        key = repr(sorted(wl_spec.items()))
        warm = shared.setdefault(key, workload_from_dict(wl_spec))
        warm.ops()                                     # derived values exist before
        got = archsim.evaluate(load_data(data, path, sets), warm)
        fresh = archsim.evaluate(archsim.load(path, sets), workload_from_dict(wl_spec))
        assert got.to_dict() == fresh.to_dict(), (cfg, sets)


def test_derived_values_follow_the_graph():
    """``ops()`` and ``resident_bytes()`` are worked out once per graph, and again after
    ``add``; a value keyed by the phase changes with it."""
    w = Workload("t", phase="prefill")
    a = w.add(Gemm(name="a", m=4, n=8, k=16))
    assert [op.name for op in w.ops()] == ["a"]
    # weights 8 x 16 fp16 = 256 B; activations in 4 x 16 + out 4 x 8, fp16 = 192 B
    assert w.resident_bytes() == 256 + 192
    w.add(Elementwise(name="b", rows=4, cols=8), after=[a])
    assert [op.name for op in w.ops()] == ["a", "b"]
    # b: 32 elements in + 32 out (fp16) = 128 B < a's 192 B: the peak stays a's
    assert w.resident_bytes() == 256 + 192
    w.add(Gemm(name="c", m=64, n=8, k=16), after=["b"])
    # c: weights 256 B more; activations 64 x 16 + 64 x 8 fp16 = 3072 B, the new peak
    assert w.resident_bytes() == 512 + 3072
    w.phase = "train"               # forward outputs stashed: a 64 B, b 64 B, c 1024 B
    assert w.resident_bytes() == 512 + 64 + 64 + 1024 + 3072
    lst = w.ops()
    lst.clear()                     # a caller's list is its own
    assert len(w.ops()) == 3


# ---- energy.prices: energy.evaluate, resolved once ------------------------------------------
def _components() -> list[energy.Component]:
    return [energy.Component("mac", "mac", count=256, attrs={"format": "int8"}),
            energy.Component("glb", "sram", attrs={"capacity_bytes": 1 << 20, "width_bits": 128}),
            energy.Component("dram", "dram", attrs={"tech": "lpddr4"})]


@pytest.mark.parametrize("latency_s", [0.0, 1e-3, 0.37])
def test_prices_equal_evaluate(latency_s):
    """Many action tables priced through one ``EnergyPrices`` give ``energy.evaluate``'s
    report each time, to the bit."""
    comps = _components()
    tech = energy.Technology(node_nm=16)
    p = energy.prices(comps, tech)
    for i in range(1, 6):
        counts = {("mac", "mac"): 1e6 * i, ("glb", "read"): 3.5e4 * i ** 2,
                  ("dram", "read"): 1.25e5 / i}
        if i % 2:
            counts[("glb", "write")] = 7.0 * i
        assert p.evaluate(counts, latency_s) == energy.evaluate(comps, counts, latency_s, tech)


@pytest.mark.parametrize("counts, latency_s, match", [
    ({("mac", "mac"): -1.0}, 1.0, "count must be a finite number >= 0"),
    ({("nope", "mac"): 1.0}, 1.0, "unknown component 'nope'"),
    ({("mac", "fly"): 1.0}, 1.0, "unknown action 'fly'"),
    ({"mac": 1.0}, 1.0, "expected \\(component name, action name\\)"),
    ({("mac", "mac"): 1.0}, -1.0, "latency_s: expected a finite number >= 0"),
])
def test_prices_errors_as_evaluate(counts, latency_s, match):
    comps = _components()
    p = energy.prices(comps)
    p.evaluate({("mac", "mac"): 2.0}, 1.0)          # a seen key does not skip the checks
    with pytest.raises(ValueError, match=match):
        energy.evaluate(comps, counts, latency_s)
    with pytest.raises(ValueError, match=match):
        p.evaluate(counts, latency_s)


# ---- small reuses inside one evaluation -----------------------------------------------------
def test_renamed_estimate_equals_replace():
    acc = archsim.load("tpu_like")
    op = Gemm(name="x", m=64, n=64, k=64)
    est = acc.units[0].estimate(op)
    assert est.renamed("y") == replace(est, op_name="y")
    assert est.op_name == "x"


def test_conv_as_gemm_kept_equals_built():
    """The im2col GEMM kept on a convolution is the closed form's: M = N P Q, N = K / g,
    K = C / g R S, batch = g; every pass as ``Gemm.as_pass`` swaps it."""
    c = Conv2d(name="c", n=2, c=32, h=14, w=14, k=64, r=3, s=3, stride=1, padding=1, groups=2)
    g = c.as_gemm()
    assert (g.m, g.n, g.k, g.batch) == (2 * 14 * 14, 32, 16 * 3 * 3, 2)
    assert c.as_gemm() is g
    assert c.as_gemm("bwd_data") == g.as_pass("bwd_data")
    assert replace(c, k=128).as_gemm().n == 64            # a changed conv gets its own


def test_override_values_lists_are_fresh():
    assert parse_value("144") == 144 and parse_value("1e3") == 1000.0
    a, b = parse_value("[1, 2]"), parse_value("[1, 2]")
    assert a == b == [1, 2] and a is not b


# ---- a killed sweep resumes from its last committed chunk ----------------------------------
SPEC = f"""
base: {ROOT / "configs/spatial/tpu_like.yaml"}
axes:
  - {{key: "units[0].rows", values: [8, 16, 32, 64, 128]}}
  - {{key: "units[0].cols", values: [8, 16, 32, 64]}}
workloads:
  - {{gemm: [128, 128, 128], a_format: int8, w_format: int8}}
objectives: [latency_s, energy_j]
"""


def test_kill_mid_chunk_resumes_from_last_committed_chunk(tmp_path):
    """One driver, chunks of 4 tasks: SIGKILL while evaluating the 11th task. Chunks 1 and 2
    (8 tasks) were committed, the third (tasks 9-12) was not: the store holds exactly the
    first 8 tasks, none of the third chunk, and the resumed sweep evaluates the other 12 and
    ends with the table of an uninterrupted run."""
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(SPEC)
    db = tmp_path / "k.sqlite"
    code = (f"import os, signal, sys\nsys.path.insert(0, {str(ROOT)!r})\n"
            "import archsim.explore.run as r\n"
            "from archsim.explore import load_spec, run_sweep\n"
            "n = [0]\n"
            "def hook(t):\n"
            "    n[0] += 1\n"
            "    if n[0] == 11:\n"
            "        os.kill(os.getpid(), signal.SIGKILL)\n"
            "r._EVAL_HOOK = hook\n"
            f"run_sweep(load_spec({str(spec_file)!r}), {str(db)!r}, workers=1, chunk=4, "
            "progress=False)\n")
    proc = subprocess.run([sys.executable, "-c", code], timeout=300)
    assert proc.returncode == -signal.SIGKILL
    spec = parse_spec_text(SPEC)
    tasks = spec.tasks()
    with ResultStore(db, readonly=True) as st:
        stored = {r["hash"] for r in st.rows()}
    assert stored == {t.hash for t in tasks[:8]}
    rep = run_sweep(spec, db, workers=1, chunk=4, progress=False)
    assert (rep.skipped, rep.evaluated) == (8, 12)
    ref = tmp_path / "ref.sqlite"
    run_sweep(spec, ref, workers=1, progress=False)
    assert _table(db) == _table(ref)


def test_chunk_is_one_transaction(tmp_path):
    """A chunk whose write fails half-way leaves none of its rows (one transaction)."""
    db = tmp_path / "t.sqlite"
    rows = [{"hash": f"h{i}", "design_id": "d", "workload": "w", "point": "{}",
             "status": "ok", "error": None, "latency_s": 1.0} for i in range(4)]
    rows[2]["no_such_column"] = 1.0                    # the third insert fails
    with ResultStore(db) as st:
        with pytest.raises(sqlite3.OperationalError):
            st.put_many(rows)
        assert st.count() == 0
        st.put_many(rows[:2])
        assert st.count() == 2


def _table(db: Path) -> list[tuple]:
    with ResultStore(db, readonly=True) as st:
        return sorted((r["hash"], r["status"], r["latency_s"], r["energy_j"], r["area_mm2"])
                      for r in st.rows())
