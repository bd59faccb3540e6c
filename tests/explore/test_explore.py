"""Design-space exploration: spec errors, Pareto = brute force, constraints, resume, Dask."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.cli import main
from archsim.explore import ResultStore, pareto_rows, parse_spec_text, run_sweep
from archsim.explore.pareto import designs, pareto_mask, pareto_mask_bruteforce
from archsim.explore.spec import ConstraintSpec, load_spec
from archsim.workloads.errors import ArchsimError, SpecError

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "configs/spatial/tpu_like.yaml"

SMALL = f"""
base: {BASE}
axes:
  - {{key: "units[0].rows", values: [8, 16, 32]}}
  - {{key: "units[0].cols", range: [8, 32, 8]}}
  - {{key: "units[0].memory.bandwidth_gbps", log_range: [100, 400, 2]}}
workloads:
  - {{gemm: [64, 128, 256], a_format: int8}}
  - {{gemm: [32, 32, 512]}}
objectives: [latency_s, energy_j]
constraints:
  area_mm2: {{max: 1000}}
"""


def _table(db):
    with ResultStore(db, readonly=True) as s:
        rows = s.rows(with_json=True)
    return [{k: v for k, v in r.items() if k not in ("created", "elapsed_s")} for r in rows]


# ---- spec ---------------------------------------------------------------------------------
def test_spec_parses_axes():
    spec = parse_spec_text(SMALL)
    assert spec.space_size == 3 * 4 * 2
    assert len(spec.tasks()) == 48
    assert len({t.hash for t in spec.tasks()}) == 48


@pytest.mark.parametrize("bad, key, line", [
    ("  - {key: \"units[0].rows\", values: [8, 16]}\n  - {key: \"units[0].cols\", rng: [1, 2, 1]}",
     "axes[1]", 7),
    ("  - {key: \"units[0].rowz\", values: [8, 16]}", "axes[0].values", 6),
    ("  - {key: \"units[0].rows\", range: [8, 16]}", "axes[0].range", 6),
    ("  - {key: \"units[0].rows\", values: [0]}", "axes[0].values", 6),
])
def test_spec_errors_name_key_and_line(bad, key, line):
    text = f"# comment\nbase: {BASE}\nworkloads:\n  - {{gemm: [8, 8, 8]}}\naxes:\n{bad}\n"
    with pytest.raises(SpecError) as ei:
        parse_spec_text(text, "s.yaml")
    probs = ei.value.problems
    assert any(p.path == key and p.line == line and p.file == "s.yaml" for p in probs), probs


def test_spec_errors_objectives_constraints_workloads(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(f"base: {BASE}\nworkloads:\n  - {{model: resnet50, a_formt: int8}}\n")
    with pytest.raises(SpecError) as ei:
        load_spec(p)
    assert "s.yaml:3 workloads[0].a_formt: unknown key" in str(ei.value)
    p.write_text(f"base: {BASE}\nworkloads:\n  - {{gemm: [8, 8, 8]}}\n"
                 "objectives: [latency_s, speed]\nconstraints:\n  foo: {max: 1}\n")
    with pytest.raises(SpecError) as ei:
        load_spec(p)
    text = str(ei.value)
    assert "objectives[1]: unknown metric 'speed'" in text and "constraints.foo" in text
    p.write_text("base: no_such_design\nworkloads:\n  - {gemm: [8, 8, 8]}\n")
    with pytest.raises(SpecError) as ei:
        load_spec(p)
    assert ei.value.problems[0].path == "base" and ei.value.problems[0].line == 1


def test_spec_error_gemm_workload_with_a_model_key(tmp_path):
    """A gemm workload takes no phase/seq/context (archsim.workload_from_dict refuses them):
    the spec loader names the key and its line instead of failing every task."""
    p = tmp_path / "s.yaml"
    p.write_text(f"base: {BASE}\nworkloads:\n  - {{gemm: [8, 8, 8], phase: decode}}\n")
    with pytest.raises(SpecError) as ei:
        load_spec(p)
    assert "s.yaml:3 workloads[0].phase: not used by a gemm workload" in str(ei.value)


# ---- Pareto ---------------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), min_size=2, max_size=2), min_size=0, max_size=40)
       | st.lists(st.lists(st.integers(0, 4), min_size=3, max_size=3), min_size=0, max_size=40))
def test_pareto_equals_bruteforce(points):
    v = np.array(points, dtype=float).reshape(len(points), -1 if points else 2)
    assert pareto_mask(v).tolist() == pareto_mask_bruteforce(v).tolist()


def _rows(vals, areas):
    return [{"design_id": f"d{i}", "point": "{}", "status": "ok", "latency_s": a,
             "energy_j": b, "area_mm2": ar} for i, ((a, b), ar) in enumerate(zip(vals, areas))]


def test_constraint_filtering():
    rows = _rows([(1, 10), (2, 5), (3, 1), (4, 4)], [50, 200, 80, 10])
    cons = {"area_mm2": ConstraintSpec(max=100)}
    front = pareto_rows(rows, ["latency_s", "energy_j"], cons)
    assert [d["design_id"] for d in front] == ["d0", "d2"]   # d1 too big; d3 dominated by d2
    assert [d["design_id"] for d in pareto_rows(rows, ["latency_s", "energy_j"])] == \
        ["d0", "d1", "d2"]
    rows[2]["status"] = "error"
    assert [d["design_id"] for d in pareto_rows(rows, ["latency_s", "energy_j"], cons)] == \
        ["d0", "d3"]
    # a design is feasible only if every workload row is
    two = _rows([(1, 1), (1, 1)], [10, 300])
    two[1]["design_id"] = "d0"
    assert designs(two, cons)[0]["feasible"] is False


# ---- running, store, resume -------------------------------------------------------------------
def test_sweep_store_and_export(tmp_path, capsys):
    spec = parse_spec_text(SMALL)
    db = tmp_path / "r.sqlite"
    rep = run_sweep(spec, db, workers=1, progress=False)
    assert (rep.total, rep.evaluated, rep.skipped) == (48, 48, 0)
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        n = c.execute("SELECT COUNT(*) FROM results WHERE status='ok' AND units_0_rows=8")
        assert n.fetchone()[0] == 16
    rep2 = run_sweep(spec, db, workers=1, progress=False)
    assert (rep2.evaluated, rep2.skipped) == (0, 48)
    assert main(["results", str(db), "--where", "units_0_rows = 8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out) == 16 and all(r["point"]["units[0].rows"] == 8 for r in out)
    assert main(["results", str(db), "--csv", "--pareto"]) == 0
    csv_text = capsys.readouterr().out
    assert csv_text.startswith("hash,") and len(csv_text.splitlines()) >= 2


def test_sweep_runs_a_model_in_the_design_native_format_like_run(tmp_path):
    """A workload without formats is evaluated as `archsim run` evaluates it: in the design's
    native format (nvdla_like: int8 PEs; the model's fp16 would be refused), and the swept
    point's numbers equal `archsim.evaluate` on the same overridden design."""
    import archsim
    from archsim.api import with_native_formats

    spec = parse_spec_text(f"""
base: {ROOT / "configs/spatial/nvdla_like.yaml"}
axes:
  - {{key: "units[0].rows", values: [16]}}
workloads:
  - {{model: resnet18}}
objectives: [latency_s, energy_j]
""")
    db = tmp_path / "n.sqlite"
    rep = run_sweep(spec, db, workers=1, progress=False)
    assert (rep.total, rep.evaluated) == (1, 1)
    with ResultStore(db, readonly=True) as st_:
        (row,) = st_.rows()
    assert row["status"] == "ok", row["error"]
    acc = archsim.load(ROOT / "configs/spatial/nvdla_like.yaml", ["units[0].rows=16"])
    wl, nat = with_native_formats(acc, archsim.workload("resnet18"))
    assert nat == "int8"
    ref = archsim.evaluate(acc, wl)
    assert row["latency_s"] == pytest.approx(ref.latency_s, rel=1e-9)
    assert row["energy_j"] == pytest.approx(ref.energy_j, rel=1e-9)


def test_concurrent_writers(tmp_path):
    """Two processes writing the same store at once lose nothing."""
    spec = parse_spec_text(SMALL)
    db = tmp_path / "c.sqlite"
    tasks = spec.tasks()
    code = ("import sys, json; sys.path.insert(0, {root!r});"
            "from archsim.explore.spec import parse_spec_text;"
            "from archsim.explore.run import run_tasks;"
            "t = parse_spec_text({spec!r}).tasks();"
            "run_tasks(t[{lo}:{hi}], {db!r}, workers=1, chunk=1, progress=False)")
    procs = [subprocess.Popen([sys.executable, "-c", code.format(root=str(ROOT), spec=SMALL,
                                                                 lo=lo, hi=hi, db=str(db))])
             for lo, hi in ((0, 30), (18, 48))]
    assert all(p.wait(60) == 0 for p in procs)
    with ResultStore(db, readonly=True) as s:
        assert s.done_hashes() == {t.hash for t in tasks}


def test_resume_after_kill(tmp_path):
    """Kill a running sweep (driver and workers) halfway; the restart recomputes no finished
    point, and the final table equals an uninterrupted run's."""
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(SMALL.replace("[8, 16, 32]", "[8, 16, 32, 64]"))
    spec = load_spec(spec_file)
    total = len(spec.tasks())
    db = tmp_path / "k.sqlite"
    code = (f"import sys, time; sys.path.insert(0, {str(ROOT)!r});"
            "import archsim.explore.run as r; from archsim.cli import main;"
            "r._EVAL_HOOK = lambda t: time.sleep(0.05);"
            f"sys.exit(main(['sweep', {str(spec_file)!r}, '--db', {str(db)!r}, '--workers', '2', "
            "'--no-progress']))")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        n = 0
        deadline = time.time() + 60
        while time.time() < deadline:
            if db.exists():
                try:
                    with ResultStore(db, readonly=True) as s:
                        n = s.count()
                except (sqlite3.Error, ArchsimError):   # store still being created
                    n = 0
                if n >= total // 4:
                    break
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)   # the driver and its workers
        proc.wait()
    before = {r["hash"]: r["created"] for r in ResultStore(db, readonly=True).rows()}
    assert 0 < len(before) < total
    rep = run_sweep(spec, db, workers=2, progress=False)
    assert rep.skipped == len(before)
    assert rep.evaluated == total - len(before)
    after = {r["hash"]: r["created"] for r in ResultStore(db, readonly=True).rows()}
    assert all(after[h] == c for h, c in before.items())        # nothing recomputed
    ref = tmp_path / "ref.sqlite"
    run_sweep(spec, ref, workers=1, progress=False)
    assert _table(db) == _table(ref)


def test_random_and_nsga2(tmp_path):
    spec = parse_spec_text(SMALL + "search: {method: random, samples: 5, seed: 3}\n")
    rep = run_sweep(spec, tmp_path / "r.sqlite", workers=1, progress=False)
    assert rep.evaluated == 10
    spec = parse_spec_text(SMALL + "search: {method: nsga2, samples: 6, generations: 3}\n")
    rep = run_sweep(spec, tmp_path / "n.sqlite", workers=1, progress=False)
    assert 12 <= rep.evaluated <= 48


def test_dask_local_cluster_identical(tmp_path):
    distributed = pytest.importorskip("distributed")
    spec = parse_spec_text(SMALL)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  protocol="tcp", host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        run_sweep(spec, tmp_path / "d.sqlite", backend="dask", client=client, progress=False)
    run_sweep(spec, tmp_path / "l.sqlite", workers=2, progress=False)
    assert _table(tmp_path / "d.sqlite") == _table(tmp_path / "l.sqlite")


@pytest.mark.slow
def test_dask_own_local_cluster(tmp_path):
    """No client and no scheduler: the backend starts (and closes) its own LocalCluster."""
    pytest.importorskip("distributed")
    spec = parse_spec_text(SMALL)
    run_sweep(spec, tmp_path / "d.sqlite", backend="dask", workers=2, progress=False)
    run_sweep(spec, tmp_path / "l.sqlite", workers=1, progress=False)
    assert _table(tmp_path / "d.sqlite") == _table(tmp_path / "l.sqlite")
