"""``archsim trace``: Chrome Trace Event JSON from the cycle simulation."""

from __future__ import annotations

import json

import pytest
import yaml

from archsim.cli import parse_args
from archsim.cli import trace as trace_command
from archsim.workloads.errors import ConfigError, WorkloadError
from tests.conftest import spatial_config


def main(argv):
    """``archsim trace ARGV`` without the CLI's error handling (errors propagate)."""
    return trace_command.run(parse_args(["trace", *argv]))


@pytest.fixture
def cfg(tmp_path):
    # 32x32 WS array at 100 MHz with (practically) unlimited bandwidth: compute-bound
    p = tmp_path / "arr.yaml"
    p.write_text(yaml.safe_dump(spatial_config(rows=32, cols=32, dataflow="ws")))
    return str(p)


def test_trace_has_one_track_per_resource_and_the_fold_time(cfg, tmp_path):
    out = tmp_path / "t.json"
    assert main([cfg, "--model", "resnet18", "--op", "layer1.0.conv1", "--out", str(out)]) == 0
    ev = json.loads(out.read_text())["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
    xs = [e for e in ev if e["ph"] == "X"]
    assert xs and all(e["tid"] in names for e in xs)
    assert len(set(names.values())) == len(names)
    # layer1.0.conv1 (64x56x56, 64 filters 3x3, pad 1) alone matches "layer1.0.conv1" and
    # its .bn/.relu: the conv is the im2col GEMM M=3136, N=64, K=576; WS on 32x32:
    # ceil(576/32) * ceil(64/32) = 36 folds of 2*32 + 32 + 3136 - 2 = 3230 cycles
    # = 116280 cycles at 100 MHz = 1162.8 us of array time.
    arr = [t for t, n in names.items() if n == "arr.array"][0]
    busy = sum(e["dur"] for e in xs if e["tid"] == arr and e["args"]["op"] == "layer1.0.conv1")
    assert busy == pytest.approx(1162.8, rel=1e-9)
    ops = {e["args"]["op"] for e in xs}
    assert ops == {"layer1.0.conv1", "layer1.0.conv1.bn", "layer1.0.conv1.relu"}


def test_unknown_op_filter_is_a_workload_error(cfg, tmp_path):
    with pytest.raises(WorkloadError, match="--op"):
        main([cfg, "--model", "resnet18", "--op", "nope", "--out", str(tmp_path / "t.json")])


def test_missing_output_directory_is_a_config_error(cfg, tmp_path):
    with pytest.raises(ConfigError, match="--out"):
        main([cfg, "--model", "resnet18", "--out", str(tmp_path / "no" / "t.json")])


def test_trace_of_every_family_with_a_command_level_memory(tmp_path):
    """The FPGA with ``memory.model: dram`` (its lowering carries the DDR4 configs in its
    SimInput) and DRAM PIM (one track per channel of the command replay + the ASIC)."""
    out = tmp_path / "f.json"
    assert main(["sat_vcu1525", "--model", "resnet18", "--op", "layer1.0.conv1",
                 "--set", "units[0].memory.model=dram", "--set",
                 "units[0].memory.preset=DDR4-2400", "--out", str(out)]) == 0
    assert any(e["ph"] == "X" for e in json.loads(out.read_text())["traceEvents"])
    out = tmp_path / "p.json"
    assert main(["pim_gpt", "--model", "gpt2-small", "--phase", "decode", "--context", "128",
                 "--a-format", "bf16", "--w-format", "bf16", "--op", "blocks.0.ffn.up",
                 "--out", str(out)]) == 0
    ev = json.loads(out.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
    # pim_gpt has 8 channels (configs/pim/pim_gpt.yaml): 8 channel tracks + the ASIC
    assert {f"pim.channel{c}" for c in range(8)} | {"pim.asic"} <= names
