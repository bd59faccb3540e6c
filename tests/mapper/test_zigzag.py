"""ZigZag inputs: the accelerator and mapping YAML (arch/zigzag), ONNX models without their
external weight data, and ``archsim map --zigzag-accelerator A --zigzag-mapping M --model X``.

Expected values are worked out from the example files (examples/zigzag/) by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

import archsim
from archsim.arch.zigzag import ARRAY_LEVEL, hierarchy, read_accelerator, read_mapping
from archsim.cli import main
from archsim.dataflow.einsum import conv2d, gemm
from archsim.workloads.errors import ConfigError
from archsim.zigzag import evaluate_zigzag, layer_constraints
from tests.conftest import ROOT

ACC = ROOT / "examples/zigzag/accelerator.yaml"
MAP = ROOT / "examples/zigzag/mapping.yaml"
LINKS = {"O": "O", "W": "I2", "I": "I1"}


def test_example_accelerator_reads_into_a_hierarchy() -> None:
    acc = read_accelerator(ACC)
    assert acc.name == "small_ws_array" and acc.sizes == (16, 16) and acc.macs == 256
    hier, cons = hierarchy(acc, LINKS, "conv2D")
    names = [lv.name for lv in hier.levels]
    assert names == ["rf_w_64B", "rf_o_2B", ARRAY_LEVEL, "sram_256KB", "dram"]
    lv = {x.name: x for x in hier.levels}
    assert lv["rf_w_64B"].instances == 256 and lv["sram_256KB"].instances == 1
    assert (lv[ARRAY_LEVEL].mesh_x, lv[ARRAY_LEVEL].mesh_y) == (16, 16)
    # rf_w: 8-bit weights, 512 bits = 64 words; 0.1 pJ per 8-bit access = 0.1 pJ/word
    assert lv["rf_w_64B"].size_words == 64 and lv["rf_w_64B"].energy_pj["read"] == 0.1
    # sram keeps inputs (8 b) and outputs (16 b): 16-bit words; 2 Mib / 16 = 131,072 words;
    # 40 pJ per 256-bit read -> 40 * 16 / 256 = 2.5 pJ/word; 256 / 16 = 16 words/cycle
    s = lv["sram_256KB"]
    assert (s.word_bits, s.size_words, s.read_bw) == (16, 131072, 16.0)
    assert s.energy_pj["read"] == pytest.approx(2.5)
    assert s.energy_pj["write"] == pytest.approx(45 * 16 / 256)
    assert lv["dram"].energy_pj["read"] == pytest.approx(700 * 16 / 64)
    assert hier.compute.energy_pj["compute"] == 0.04 and hier.compute.instances == 256
    assert cons.levels["rf_w_64B"].keep == frozenset({"Weights"})
    assert cons.levels["sram_256KB"].keep == frozenset({"Inputs", "Outputs"})


def test_mapping_becomes_spatial_constraints() -> None:
    acc = read_accelerator(ACC)
    entries = {e.name: e for e in read_mapping(MAP)}
    _, base = hierarchy(acc, LINKS, "conv2D")
    c = layer_constraints(conv2d(1, 64, 128, 56, 56, 3, 3), "conv2D", entries["default"], base,
                          acc).levels[ARRAY_LEVEL]
    # ZigZag K (output channels) = our M on D1 = X; C on D2 = Y; every other dim 1
    assert c.spatial_factors == {"C": 16, "M": 16, "R": 1, "S": 1, "N": 1, "P": 1, "Q": 1}
    assert c.spatial_permutation == ("M", "C") and c.spatial_split == 1
    # 3 input channels: the largest divisor of 3 not above 16; a 1000-way FC: 10
    c3 = layer_constraints(conv2d(1, 3, 64, 112, 112, 7, 7), "conv2D", entries["default"],
                           base, acc).levels[ARRAY_LEVEL]
    assert c3.spatial_factors["C"] == 3
    _, gbase = hierarchy(acc, LINKS, "gemm")
    g = layer_constraints(gemm(1, 1000, 512), "gemm", entries["Gemm"], gbase,
                          acc).levels[ARRAY_LEVEL]
    assert g.spatial_factors == {"M": 1, "N": 10, "K": 16}


def _onnx_with_external_weights(tmp_path: Path) -> Path:
    """A conv + FC model whose weights (tensors over 1 KiB) live in a side file, which is
    then deleted (as ZigZag's bundled ONNX models ship without it); the small Reshape target
    stays in the model, as ``onnx.save_model`` keeps it by default."""
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])
    inits = [numpy_helper.from_array(np.ones((32, 16, 3, 3), np.float32), "w1"),
             numpy_helper.from_array(np.ones((32 * 8 * 8, 10), np.float32), "w2"),
             numpy_helper.from_array(np.array([1, -1], np.int64), "shape")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "shape"], ["f"], name="flat"),
             helper.make_node("MatMul", ["f", "w2"], ["y"], name="fc")]
    model = helper.make_model(helper.make_graph(nodes, "ext", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "ext.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="ext.weights", size_threshold=1024)
    (tmp_path / "ext.weights").unlink()
    return path


def test_onnx_without_external_data_and_the_zigzag_run(tmp_path: Path) -> None:
    path = _onnx_with_external_weights(tmp_path)
    wl = archsim.workload(str(path))
    assert wl.op("conv").macs() == 32 * 16 * 9 * 8 * 8 and wl.op("fc").macs() == 2048 * 10
    run = evaluate_zigzag(ACC, MAP, wl, evaluations=4096)
    assert [x.name for x in run.layers] == ["conv", "fc"] and run.skipped == 1
    conv, fc = run.layers
    assert (conv.entry, fc.entry) == ("default", "Gemm")
    # conv: K=32 -> 16 on X, C=16 -> 16 on Y: all 256 MACs busy, so >= 73,728 / 256 cycles
    array = conv.mapping.levels[2]                  # rf_w, rf_o, the array, sram, dram
    assert sorted((d, f) for d, f, _ in array.spatial) == [("C", 16), ("M", 16)]
    assert conv.result.cycles >= 32 * 16 * 9 * 64 // 256
    for x in run.layers:           # energy >= the MACs alone (0.04 pJ each)
        assert x.result.feasible and x.result.energy_pj > 0.04 * x.result.macs
    assert run.energy_pj == pytest.approx(conv.result.energy_pj + fc.result.energy_pj)


def _cli(*args: str) -> int:
    try:
        return main(list(args))
    except SystemExit as exc:           # usage errors exit through argparse
        return int(exc.code or 0)


def test_cli_runs_and_reports_errors_by_file_line_key(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = _onnx_with_external_weights(tmp_path)
    args = ["map", "--zigzag-accelerator", str(ACC), "--zigzag-mapping", str(MAP),
            "--model", str(path)]
    assert _cli(*args) == 0
    out = capsys.readouterr().out
    assert "small_ws_array" in out and "total: 2 layers mapped" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text(ACC.read_text().replace("served_dimensions: [D1, D2]\n\n  dram",
                                           "served_dimensions: [D1]\n\n  dram"))
    assert _cli("map", "--zigzag-accelerator", str(bad), "--zigzag-mapping", str(MAP),
                "--model", str(path)) == 2
    err = capsys.readouterr().err
    line = next(i for i, t in enumerate(bad.read_text().splitlines(), 1)
                if t.strip() == "served_dimensions: [D1]")
    assert f"bad.yaml:{line} memories.sram_256KB.served_dimensions" in err
    assert _cli("map", "--zigzag-accelerator", str(ACC), "--model", str(path)) == 2
    assert "--zigzag-mapping" in capsys.readouterr().err
    assert _cli(*args, "--tp", "2") == 2
    assert "--tp cannot be used with ZigZag inputs" in capsys.readouterr().err


@pytest.mark.parametrize("text, where", [
    ("- name: default\n  spatial_mapping:\n    D1:\n      - K\n", ":3 [0].spatial_mapping.D1"),
    ("- name: default\n  bogus: 1\n", ":2 [0].bogus"),
    ("- name: default\n  memory_operand_links:\n    W: I9\n",
     ":3 [0].memory_operand_links.W"),
])
def test_bad_mapping_files(tmp_path: Path, text: str, where: str) -> None:
    p = tmp_path / "m.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as ei:
        read_mapping(p)
    assert where in str(ei.value)


def test_unknown_array_dimension_and_temporal_ordering(tmp_path: Path) -> None:
    wl = archsim.workload(str(_onnx_with_external_weights(tmp_path)))
    p = tmp_path / "m.yaml"
    p.write_text("- name: default\n  spatial_mapping:\n    D3:\n      - K, 4\n")
    with pytest.raises(ConfigError, match="unknown array dimension 'D3'"):
        evaluate_zigzag(ACC, p, wl, evaluations=1024)
    p.write_text("- name: default\n  spatial_mapping:\n    D1:\n      - K, 32\n")
    with pytest.raises(ConfigError, match="unrolls K 32 on array dimension D1 of size 16"):
        evaluate_zigzag(ACC, p, wl, evaluations=1024)
    p.write_text("- name: default\n  temporal_ordering:\n    - [OX, 8]\n")
    with pytest.raises(ConfigError, match="temporal_ordering is not read"):
        evaluate_zigzag(ACC, p, wl, evaluations=1024)


def test_zigzag3_port_bandwidths(tmp_path: Path) -> None:
    """ZigZag 3.x gives bandwidths on the ports: the SRAM of the example with one read_write
    port of 256 bits per cycle reads and writes 16 words per cycle in total (shared); its
    cost still prices one 256-bit access (2.5 pJ per 16-bit word)."""
    text = ACC.read_text()
    old = ("    r_bw: 256\n    w_bw: 256\n    r_cost: 40.0\n    w_cost: 45.0\n    area: 0\n"
           "    r_port: 1\n    w_port: 1\n    rw_port: 0\n    latency: 1\n"
           "    operands: [I1, O]\n    ports:\n      - fh: w_port_1\n        tl: r_port_1\n"
           "      - fh: w_port_1\n        tl: r_port_1\n        fl: w_port_1\n"
           "        th: r_port_1\n")
    new = ("    r_cost: 40.0\n    w_cost: 45.0\n    area: 0\n    latency: 1\n"
           "    operands: [I1, O]\n    ports:\n      - name: rw_port_1\n"
           "        type: read_write\n        bandwidth_min: 64\n        bandwidth_max: 256\n"
           "        allocation:\n          - I1, tl\n          - O, fl\n")
    assert old in text
    p = tmp_path / "acc3.yaml"
    p.write_text(text.replace(old, new))
    hier, _ = hierarchy(read_accelerator(p), LINKS, "conv2D")
    s = next(lv for lv in hier.levels if lv.name == "sram_256KB")
    assert s.shared_bw and s.read_bw == 16.0
    assert s.energy_pj["read"] == pytest.approx(2.5)
    p.write_text(text.replace(old, new.replace("read_write", "sideways")))
    with pytest.raises(ConfigError, match="expected type read, write or read_write"):
        read_accelerator(p)
