"""Plots (PNG and SVG), heat-map tables, the roofline property, the HTML report, ONNX import."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import archsim
from archsim.cli import main
from archsim.explore import parse_spec_text, run_sweep
from archsim.explore.pareto import designs
from archsim.explore.plots import (
    heatmap_table,
    plot_component_breakdown,
    plot_op_breakdown,
    plot_roofline,
)
from archsim.explore.store import ResultStore

ROOT = Path(__file__).resolve().parents[2]
HETERO = ROOT / "examples/nasaic/hetero.yaml"
SWEEP = f"""base: {ROOT / "configs/spatial/tpu_like.yaml"}
axes:
  - {{key: "units[0].rows", values: [8, 16]}}
  - {{key: "units[0].cols", values: [8, 16, 32]}}
  - {{key: "units[0].dataflow", values: [ws, os]}}
workloads:
  - {{gemm: [64, 128, 256], a_format: int8}}
objectives: [latency_s, energy_j]
constraints:
  area_mm2: {{max: 1000}}
"""


def _is_png(p: Path) -> bool:
    return p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _is_svg(p: Path) -> bool:
    return b"<svg" in p.read_bytes()[:2000]


@pytest.fixture(scope="module")
def hetero_result():
    acc = archsim.load(HETERO)
    wl = archsim.workload("resnet18", a_format="int8", w_format="int8")
    return acc, wl, archsim.evaluate(acc, wl)


def test_breakdown_and_roofline_files(tmp_path, hetero_result):
    acc, wl, res = hetero_result
    for ext, ok in (("png", _is_png), ("svg", _is_svg)):
        assert ok(plot_op_breakdown(res, tmp_path / f"op.{ext}", top=10))
        assert ok(plot_component_breakdown(res, tmp_path / f"comp.{ext}"))
        assert ok(plot_roofline(acc, wl, res, tmp_path / f"roof.{ext}"))


def test_roofline_points_under_their_roof(hetero_result):
    """The points the roofline draws never lie above their unit's roof (Unit contract)."""
    acc, wl, res = hetero_result
    n = 0
    for o in res.ops:
        if o.macs and o.dram_bytes and o.latency_s:
            u = acc.unit(o.unit)
            intensity = 2 * o.macs / o.dram_bytes
            roof = min(2 * u.peak_macs_per_cycle(wl.op(o.name)) * u.clock_hz,
                       intensity * u.peak_bytes_per_cycle() * u.clock_hz)
            assert 2 * o.macs / o.latency_s <= roof * (1 + 1e-9), o
            n += 1
    assert n > 0


def test_heatmap_table_is_min_over_other_axes(tmp_path):
    db = tmp_path / "s.sqlite"
    run_sweep(parse_spec_text(SWEEP), db, workers=1, progress=False)
    with ResultStore(db, readonly=True) as st:
        rows = st.rows()
    xs, ys, table = heatmap_table(rows, "units[0].rows", "units[0].cols", "latency_s")
    assert xs == [8, 16] and ys == [8, 16, 32]
    import json
    for d in designs(rows):
        p = json.loads(d["point"])
        others = [e["latency_s"] for e in designs(rows)
                  if json.loads(e["point"])["units[0].rows"] == p["units[0].rows"]
                  and json.loads(e["point"])["units[0].cols"] == p["units[0].cols"]]
        assert table[ys.index(p["units[0].cols"])][xs.index(p["units[0].rows"])] == min(others)
    xs, ys, table = heatmap_table(rows, "units[0].rows", "units[0].cols", "latency_s",
                                  reduce="mean")
    assert all(math.isfinite(v) for r in table for v in r)


def test_plot_cli_and_report(tmp_path, capsys):
    db = tmp_path / "s.sqlite"
    run_sweep(parse_spec_text(SWEEP), db, workers=1, progress=False)
    assert main(["plot", "heatmap", str(db), "--x", "units[0].rows", "--y", "units[0].cols",
                      "-o", str(tmp_path / "h.png"), "-o", str(tmp_path / "h.svg")]) == 0
    assert _is_png(tmp_path / "h.png") and _is_svg(tmp_path / "h.svg")
    assert main(["plot", "pareto", str(db), "-o", str(tmp_path / "p.svg")]) == 0
    assert main(["plot", "roofline", str(HETERO), "--model", "resnet18", "--a-format", "int8",
                      "--w-format", "int8", "-o", str(tmp_path / "r.png")]) == 0
    assert main(["plot", "breakdown", "tpu_like", "--model", "resnet18", "--by", "component",
                      "-o", str(tmp_path / "b.png")]) == 0
    # bad input: a clear message and exit status 2, no traceback
    assert main(["plot", "pareto", str(tmp_path / "none.sqlite"), "-o", "x.png"]) == 2
    assert main(["plot", "heatmap", str(db), "--x", "a", "--y", "b", "--metric", "speed",
                      "-o", str(tmp_path / "x.png")]) == 2
    assert main(["plot", "breakdown", "tpu_like", "--model", "resnet18", "--set",
                      "units[0].rowz=4", "-o", str(tmp_path / "x.png")]) == 2
    assert "rowz" in capsys.readouterr().err
    out = tmp_path / "rep"
    assert main(["report", str(db), "-o", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert "Pareto-front designs" in page and "pareto.svg" in page and "heatmap.svg" in page
    front = page.split("<h2>Pareto-front designs</h2>")[1].split("</table>")[0]
    from archsim.explore import sweep_front
    n_front = len(sweep_front(db, ["latency_s", "energy_j"]))
    assert front.count("<tr>") == n_front + 1          # header + one row per front design
    assert main(["report", str(tmp_path / "none.sqlite"), "-o", str(out)]) == 2


def test_cosearch_outputs(tmp_path):

    (tmp_path / "acc.py").write_text("def f(net):\n    return 0.5 + 0.1 * net['depth']\n")
    (tmp_path / "co.yaml").write_text(f"""hardware:
  base: {HETERO}
  axes:
    - {{key: "units[0].rows", values: [8, 16]}}
tasks:
  - name: img
    network: {{cnn: {{image: 16, stages: 2, depth: [1, 2], width: 8}}}}
    accuracy: {{python: "acc:f"}}
    a_format: int8
    w_format: int8
specs:
  S: {{area_mm2: {{max: 100}}}}
""")
    assert main(["cosearch", str(tmp_path / "co.yaml"), "--db", str(tmp_path / "c.sqlite"),
                          "--out", str(tmp_path / "o"), "--workers", "1", "--no-progress"]) == 0
    for f in ("summary.txt", "pareto.csv", "best.csv"):
        assert (tmp_path / "o" / f).stat().st_size > 0
    assert _is_png(tmp_path / "o/cosearch.png") and _is_svg(tmp_path / "o/cosearch.svg")
    (tmp_path / "bad.yaml").write_text("hardware: {base: nowhere.yaml}\ntasks: []\n")
    assert main(["cosearch", str(tmp_path / "bad.yaml"), "--db", str(tmp_path / "b.sqlite")]) == 2


# ---- ONNX ------------------------------------------------------------------------------------
def _tiny_onnx(path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 10])
    inits = [numpy_helper.from_array(np.zeros(s, np.float32), n) for n, s in
             (("w1", (16, 3, 3, 3)), ("sc", (16,)), ("bi", (16,)), ("mu", (16,)),
              ("va", (16,)), ("w2", (64, 10)), ("g", (10,)), ("b", (10,)))]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c"], name="conv", pads=[1, 1, 1, 1],
                         strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c", "sc", "bi", "mu", "va"], ["bn"],
                         name="bn"),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[4, 4],
                         strides=[4, 4]),                                   # N,16,4,4
        helper.make_node("Reshape", ["p", "shape"], ["f"], name="reshape"),  # N,4,64
        helper.make_node("MatMul", ["f", "w2"], ["m"], name="fc"),         # N,4,10
        helper.make_node("LayerNormalization", ["m", "g", "b"], ["ln"], name="ln", axis=-1),
        helper.make_node("Softmax", ["ln"], ["y"], name="softmax", axis=-1),
    ]
    shape = numpy_helper.from_array(np.array([-1, 4, 64], np.int64), "shape")
    g = helper.make_graph(nodes, "tiny", [x], [y], inits + [shape])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_onnx_import(tmp_path):
    _tiny_onnx(tmp_path / "tiny.onnx")
    from archsim.workloads.onnx_import import from_onnx

    w = from_onnx(tmp_path / "tiny.onnx", batch=2)
    kinds = [(o.name, o.kind) for o in w.ops()]
    assert kinds == [("conv", "conv2d"), ("bn", "elementwise"), ("relu", "elementwise"),
                     ("pool", "elementwise"), ("fc", "gemm"), ("ln", "norm"),
                     ("softmax", "softmax")]
    # conv: 2 images x 16 x 16x16 outputs x 3*3*3; fc: (2*4) x 10 x 64
    assert w.op("conv").macs() == 2 * 16 * 16 * 16 * 27
    assert w.op("fc").macs() == 2 * 4 * 10 * 64
    assert w.op("bn").elements == 2 * 16 * 16 * 16 and w.op("softmax").elements == 2 * 4 * 10
    # conv and MatMul weights, BN scale + shift per channel, LayerNorm gain + shift
    assert w.parameters == 16 * 27 + 64 * 10 + 2 * 16 + 2 * 10
    assert ("pool", "fc") in w.graph.edges          # through the skipped Reshape
    res = archsim.evaluate(archsim.load(HETERO), w.with_formats(
        archsim.api.get_format("int8"), archsim.api.get_format("int8")))
    assert res.latency_s > 0


def test_onnx_errors(tmp_path):
    pytest.importorskip("onnx")
    from archsim.workloads.errors import WorkloadError
    from archsim.workloads.onnx_import import from_onnx

    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    with pytest.raises(WorkloadError) as ei:
        from_onnx(tmp_path / "bad.onnx")
    assert ei.value.problems[0].file == str(tmp_path / "bad.onnx")
