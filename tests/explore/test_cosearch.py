"""Conditional axes, candidate networks, co-search (vs brute force), the sequential baseline."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from archsim.explore import parse_spec_text, run_sweep
from archsim.explore.cosearch import analyse, load_cosearch, parse_cosearch_text, run_cosearch
from archsim.explore.nas import build_network
from archsim.explore.pareto import pareto_mask_bruteforce
from archsim.explore.store import ResultStore
from archsim.workloads.errors import SpecError, WorkloadError

ROOT = Path(__file__).resolve().parents[2]
TPU = ROOT / "configs/spatial/tpu_like.yaml"
HETERO = ROOT / "examples/nasaic/hetero.yaml"


# ---- conditional axes ---------------------------------------------------------------------
COND = f"""base: {TPU}
workloads:
  - {{gemm: [32, 32, 64], a_format: int8}}
axes:
  - {{key: "units[0].rows", values: [8, 16, 32]}}
  - {{key: "units[0].dataflow", values: [ws, os, is]}}
  - {{key: "units[0].pe_register_bytes", values: [16, 64],
     when: {{"units[0].dataflow": [os, is]}}}}
  - {{key: "units[0].glb_width_bits", values: [64, 128, 256],
     when: {{"units[0].dataflow": is, "units[0].pe_register_bytes": 64}}}}
"""


def test_conditional_grid_counts_and_points():
    spec = parse_spec_text(COND)
    # per rows value: ws -> 1; os -> 2 registers; is -> reg 16 (1) + reg 64 x 3 widths = 4
    assert spec.space_size == 3 * (1 + 2 + 4) == 21
    pts = spec.grid()
    assert len({p.design_id for p in pts}) == 21
    ws = [p.as_dict() for p in pts if p.as_dict()["units[0].dataflow"] == "ws"]
    assert all(set(d) == {"units[0].rows", "units[0].dataflow"} for d in ws)
    # decoding an index drops inactive axes
    assert spec.point_of((0, 0, 1, 2)).as_dict() == {"units[0].rows": 8,
                                                      "units[0].dataflow": "ws"}
    assert spec.point_of((0, 2, 1, 2)).as_dict()["units[0].glb_width_bits"] == 256


def test_conditional_sweep_runs_random_and_nsga2(tmp_path):
    spec = parse_spec_text(COND)
    rep = run_sweep(spec, tmp_path / "g.sqlite", workers=1, progress=False)
    assert (rep.total, rep.evaluated) == (21, 21)
    with ResultStore(tmp_path / "g.sqlite", readonly=True) as st:
        # an inactive axis is NULL in its column
        assert st.count("units_0_dataflow = 'ws' AND units_0_pe_register_bytes IS NULL") == 3
    spec = parse_spec_text(COND + "search: {method: random, samples: 5, seed: 1}\n")
    assert run_sweep(spec, tmp_path / "r.sqlite", workers=1, progress=False).evaluated == 5
    spec = parse_spec_text(COND + "search: {method: nsga2, samples: 4, generations: 2}\n")
    rep = run_sweep(spec, tmp_path / "n.sqlite", workers=1, progress=False)
    assert 4 <= rep.evaluated <= 21


@pytest.mark.parametrize("when, msg", [
    ('{"units[0].dataflw": os}', "no axis"),
    ('{"units[0].dataflow": xx}', "'xx' is not a value of axis"),
    ('{"units[0].rows": 8}', "a later axis"),
    ("[1, 2]", "expected a non-empty mapping"),
])
def test_conditional_errors_name_key_and_line(when, msg):
    text = (f"base: {TPU}\nworkloads:\n  - {{gemm: [8, 8, 8]}}\naxes:\n"
            '  - {key: "units[0].dataflow", values: [ws, os]}\n'
            f'  - {{key: "units[0].pe_register_bytes", values: [16],\n     when: {when}}}\n'
            '  - {key: "units[0].rows", values: [8, 16]}\n')
    with pytest.raises(SpecError) as ei:
        parse_spec_text(text, "c.yaml")
    p = ei.value.problems[0]
    assert p.file == "c.yaml" and p.line == 7 and p.path.startswith("axes[1].when"), p
    assert msg in p.message


# ---- candidate networks ---------------------------------------------------------------------
def test_resnet20_from_the_cnn_space():
    """depth 3, width 16, 3 stages, 3x3, expansion 1 = ResNet-20 for CIFAR-10 (He et al. 2016,
    with 1x1 projection shortcuts): parameters and MACs in closed form."""
    w = build_network({"net": "cnn", "image": 32, "classes": 10, "stages": 3, "depth": 3,
                       "width": 16, "kernel": 3, "expansion": 1})
    conv = (3 * 16 * 9 + 6 * 16 * 16 * 9                       # stem, stage 0
            + 16 * 32 * 9 + 5 * 32 * 32 * 9 + 16 * 32           # stage 1 + shortcut
            + 32 * 64 * 9 + 5 * 64 * 64 * 9 + 32 * 64)          # stage 2 + shortcut
    bn = 2 * (16 + 6 * 16 + 7 * 32 + 7 * 64)                    # scale + shift per channel
    assert w.parameters == conv + bn + 64 * 10 + 10 == 272474  # "0.27M" in He et al. 2016
    macs = (32 * 32 * 16 * 27 + 6 * 32 * 32 * 16 * 144
            + 16 * 16 * 32 * 144 + 5 * 16 * 16 * 32 * 288 + 16 * 16 * 32 * 16
            + 8 * 8 * 64 * 288 + 5 * 8 * 8 * 64 * 576 + 8 * 8 * 64 * 32 + 64 * 10)
    assert w.macs() == macs


def test_inverted_residual_block_shapes():
    """One stage, one block, expansion 4, kernel 5: expand 1x1, depthwise 5x5, project."""
    w = build_network({"net": "cnn", "image": 8, "classes": 2, "stages": 1, "depth": 1,
                       "width": 4, "kernel": 5, "expansion": 4})
    dw = w.op("s0.b0.dw")
    assert (dw.c, dw.k, dw.groups, dw.r) == (16, 16, 16, 5)
    # stem 3x3 (3->4), expand 4->16, dw 16x25, project 16->4, fc 4->2 (per pixel of 8x8)
    assert w.macs() == 64 * (3 * 4 * 9 + 4 * 16 + 16 * 25 + 16 * 4) + 4 * 2


def test_bad_networks_raise_workload_errors():
    with pytest.raises(WorkloadError, match="multiple of heads"):
        build_network({"net": "transformer", "layers": 1, "d_model": 30, "heads": 4,
                       "ffn": 64, "seq": 8, "vocab": 10, "classes": 2})
    with pytest.raises(WorkloadError, match="odd"):
        build_network({"net": "cnn", "image": 32, "classes": 10, "stages": 1, "depth": 1,
                       "width": 4, "kernel": 4, "expansion": 1})


# ---- co-search ------------------------------------------------------------------------------
def _cosearch_text(csv_name: str = "acc.csv", specs: str = "") -> str:
    return f"""hardware:
  base: {HETERO}
  axes:
    - {{key: "units[0].rows", values: [8, 16]}}
    - {{key: "units[1].dataflow", values: [os, ws]}}
tasks:
  - name: img
    network: {{cnn: {{image: 16, classes: 10, stages: 2, depth: [1, 2], width: 8,
                      expansion: [1, 2]}}}}
    accuracy: {{csv: {csv_name}}}
    a_format: int8
    w_format: int8
  - name: txt
    network: {{transformer: {{layers: [1, 2], d_model: 32, heads: 2, ffn: 64, seq: 16,
                              vocab: 100}}}}
    accuracy: {{python: "tiny_acc:txt"}}
    weight: 2
    a_format: int8
    w_format: int8
specs:
{specs or "  loose: {area_mm2: {max: 1000}}"}
objectives: [accuracy, energy_j, area_mm2]
"""


def _write_predictors(tmp_path: Path) -> None:
    (tmp_path / "acc.csv").write_text("depth,expansion,accuracy\n1,1,0.80\n1,2,0.83\n"
                                      "2,1,0.86\n2,2,0.90\n")
    (tmp_path / "tiny_acc.py").write_text("def txt(net):\n    return 0.7 + 0.05 * net['layers']\n")


def test_cosearch_equals_brute_force(tmp_path):
    _write_predictors(tmp_path)
    spec = parse_cosearch_text(_cosearch_text(), "co.yaml", tmp_path)
    db = tmp_path / "co.sqlite"
    res = run_cosearch(spec, db, workers=1, progress=False)
    # 4 hardware points x (4 + 2) networks evaluated; 4 x 4 x 2 solutions
    assert res.evaluated == 24 and len(res.solutions) == 32
    with ResultStore(db, readonly=True) as st:
        rows = st.rows()
    assert len(rows) == 24 and all(r["status"] == "ok" for r in rows)
    cell = {(r["design_id"], r["workload"]): r for r in rows}
    acc_img = {(1, 1): 0.80, (1, 2): 0.83, (2, 1): 0.86, (2, 2): 0.90}
    brute = []
    for did in {r["design_id"] for r in rows}:
        for (d, e), layers in itertools.product(acc_img, (1, 2)):
            a = cell[(did, f"img:cnn-d{d}w8k3e{e}s2")]
            b = cell[(did, f"txt:tf-l{layers}d32h2f64")]
            brute.append({"accuracy": (acc_img[(d, e)] + 2 * (0.7 + 0.05 * layers)) / 3,
                          "energy_j": a["energy_j"] + b["energy_j"],
                          "latency_s": a["latency_s"] + b["latency_s"],
                          "area_mm2": a["area_mm2"]})
    got = sorted((s["accuracy"], s["energy_j"], s["latency_s"]) for s in res.solutions)
    want = sorted((s["accuracy"], s["energy_j"], s["latency_s"]) for s in brute)
    assert np.allclose(got, want, rtol=1e-12)
    v = np.array([[-s["accuracy"], s["energy_j"], s["area_mm2"]] for s in brute])
    mask = pareto_mask_bruteforce(v)
    assert sorted(map(tuple, v[mask].tolist())) == sorted(
        (-s["accuracy"], s["energy_j"], s["area_mm2"]) for s in res.pareto)
    # best under the loose spec: the most accurate networks, then the least energy
    top = max(s["accuracy"] for s in brute)
    assert res.best["loose"]["accuracy"] == pytest.approx(top)
    assert res.best["loose"]["energy_j"] == pytest.approx(
        min(s["energy_j"] for s in brute if s["accuracy"] == pytest.approx(top)))
    # resume: nothing is evaluated twice
    with ResultStore(db, readonly=True) as st:
        created = {r["hash"]: r["created"] for r in st.rows()}
    res2 = run_cosearch(spec, db, workers=1, progress=False)
    with ResultStore(db, readonly=True) as st:
        assert {r["hash"]: r["created"] for r in st.rows()} == created
    assert res2.best["loose"]["design_id"] == res.best["loose"]["design_id"]


def test_sequential_baseline_violates_where_cosearch_meets(tmp_path):
    """An energy spec between the smallest and the largest networks' energy: the baseline
    (most accurate networks first) cannot meet it on any hardware; co-search can."""
    _write_predictors(tmp_path)
    spec = parse_cosearch_text(_cosearch_text(), "co.yaml", tmp_path)
    res = run_cosearch(spec, tmp_path / "co.sqlite", workers=1, progress=False)
    sols = res.solutions
    top = max(s["accuracy"] for s in sols)
    e_top = min(s["energy_j"] for s in sols if s["accuracy"] == pytest.approx(top))
    e_min = min(s["energy_j"] for s in sols)
    assert e_min < e_top
    limit = (e_min + e_top) / 2
    tight = parse_cosearch_text(_cosearch_text(specs=f"  tight: {{energy_j: {{max: {limit}}}}}"),
                                "co.yaml", tmp_path)
    with ResultStore(tmp_path / "co.sqlite", readonly=True) as st:
        res = analyse(tight, st.rows())
    base, best = res.baseline["tight"], res.best["tight"]
    assert base["networks"] == {"img": "cnn-d2w8k3e2s2", "txt": "tf-l2d32h2f64"}
    assert "energy_j" in base["violations"] and base["energy_j"] == pytest.approx(e_top)
    assert best is not None and best["energy_j"] <= limit and best["accuracy"] < top
    want = max(s["accuracy"] for s in sols if s["energy_j"] <= limit)
    assert best["accuracy"] == pytest.approx(want)
    assert "VIOLATES energy_j" in res.summary()


@pytest.mark.parametrize("edit, path, line", [
    (("depth: [1, 2]", "depth: [1, 0]"), "tasks[0].network.cnn.depth", 8),
    (("width: 8", "widht: 8"), "tasks[0].network.cnn.widht", 8),
    (('"units[0].rows"', '"units[0].rowz"'), "hardware.axes[0].values", 4),
    (("loose: {area_mm2", "loose: {area_m2"), "specs.loose.area_m2", 21),
    (("tiny_acc:txt", "tiny_acc:nope"), "tasks[1].accuracy", 16),
    (("acc.csv", "missing.csv"), "tasks[0].accuracy", 10),
    (("values: [os, ws]}", "values: [os, ws]}\n  search: {method: nsga2}"),
     "hardware.search.method", 6),
])
def test_cosearch_spec_errors_name_key_and_line(tmp_path, edit, path, line):
    _write_predictors(tmp_path)
    text = _cosearch_text().replace(*edit)
    with pytest.raises(SpecError) as ei:
        parse_cosearch_text(text, "co.yaml", tmp_path)
    assert any(p.path == path and p.line == line for p in ei.value.problems), \
        ei.value.render()


def test_csv_accuracy_missing_row_is_a_spec_error(tmp_path):
    _write_predictors(tmp_path)
    (tmp_path / "acc.csv").write_text("depth,expansion,accuracy\n1,1,0.80\n")
    with pytest.raises(SpecError, match="no row for network"):
        parse_cosearch_text(_cosearch_text(), "co.yaml", tmp_path)


@pytest.mark.slow
def test_nasaic_example(tmp_path):
    """examples/nasaic: the sequential baseline violates spec S1, co-search meets it."""
    spec = load_cosearch(ROOT / "examples/nasaic/cosearch.yaml")
    res = run_cosearch(spec, tmp_path / "n.sqlite", workers=2, progress=False)
    base, best = res.baseline["S1"], res.best["S1"]
    assert base["violations"] and best is not None
    assert best["accuracy"] < base["accuracy"]
    for k, c in spec.specs["S1"].items():
        assert best[k] <= c.max
    json.dumps(res.table("best"))


def test_cosearch_dask_local_cluster_identical(tmp_path):
    distributed = pytest.importorskip("distributed")
    _write_predictors(tmp_path)
    spec = parse_cosearch_text(_cosearch_text(), "co.yaml", tmp_path)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  protocol="tcp", host="127.0.0.1",
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        a = run_cosearch(spec, tmp_path / "d.sqlite", backend="dask", client=client,
                         progress=False)
    b = run_cosearch(spec, tmp_path / "l.sqlite", workers=1, progress=False)
    assert a.summary() == b.summary()
    assert [s["design_id"] for s in a.pareto] == [s["design_id"] for s in b.pareto]
