"""CLI: --json prints exactly one object; bad input -> one message, exit 2, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from archsim.cli import main
from tests.conftest import ROOT

RESULT_KEYS = {"latency_s", "cycles", "energy_j", "area_mm2", "energy_breakdown_j",
               "area_breakdown_mm2", "utilization", "tokens_per_s", "samples_per_s", "ops",
               "archsim_version", "input_hash"}


def run_cli(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_gemm_json_is_one_object(capsys):
    code, out, _ = run_cli(capsys, "gemm", str(ROOT / "configs/spatial/tpu_like.yaml"),
                           "--m", "1024", "--n", "1024", "--k", "1024", "--json")
    assert code == 0
    d = json.loads(out)  # exactly one JSON document
    assert RESULT_KEYS <= set(d)
    assert d["macs"] == 1024 ** 3
    assert {"name", "kind", "unit", "dataflow", "cycles", "latency_s", "energy_j",
            "utilization"} <= set(d["ops"][0])
    # energy and area breakdowns add up to their totals
    assert sum(d["energy_breakdown_j"].values()) == pytest.approx(d["energy_j"])
    assert sum(d["area_breakdown_mm2"].values()) == pytest.approx(d["area_mm2"])


def test_same_input_same_hash_and_numbers(capsys):
    args = ("gemm", "tpu_like", "--m", "64", "--n", "128", "--k", "256", "--json")
    _, a, _ = run_cli(capsys, *args)
    _, b, _ = run_cli(capsys, *args)
    assert a == b
    _, c, _ = run_cli(capsys, *args, "--set", "units[0].rows=64")
    assert json.loads(c)["input_hash"] != json.loads(a)["input_hash"]


@pytest.mark.parametrize("args,needle", [
    (("gemm", "tpu_like", "--m", "0", "--n", "1", "--k", "1"), "--m"),
    (("gemm", "tpu_like", "--m", "8", "--n", "8", "--k", "8", "--a-format", "fp7"),
     "unknown number format 'fp7'"),
    (("gemm", "no_such_design", "--m", "8", "--n", "8", "--k", "8"), "no config file"),
    (("gemm", "tpu_like", "--m", "8", "--n", "8", "--k", "8", "--set", "units[0].rows=x"),
     "--set units[0].rows: expected int"),
    (("gemm", "tpu_like", "--m", "8", "--n", "8", "--k", "8", "--fidelity", "exact"), "--fidelity"),
    (("validate", "/nonexistent.yaml"), "cannot read file"),
    (("frobnicate",), "invalid choice"),
    (("run", "tpu_like", "--model", "gpt5"), "unknown model 'gpt5'"),
    (("run", "tpu_like", "--phase", "sideways"), "--phase"),
    (("run", "tpu_like", "--batch", "-3"), "--batch"),
    (("run", "tpu_like", "--tp", "0"), "--tp"),
    (("run", "gpu/h100", "--model", "llama2-7b", "--tp", "3"),
     "tp: tensor-parallel degree 3 must divide llama2-7b's 32 attention heads"),
    (("run", "gpu/h100", "--model", "resnet50", "--tp", "2"), "tensor parallelism applies to "
     "transformers"),
])
def test_bad_input_exits_2_with_one_message(args, needle):
    p = subprocess.run([sys.executable, "-m", "archsim", *args], capture_output=True, text=True,
                       cwd=ROOT)
    assert p.returncode == 2
    assert needle in p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""


def test_bad_config_file_via_cli(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("name: x\nunits:\n  - kind: spatial_array\n    rows: 4\n    cols: 4\n"
                   "    clock_mhz: fast\n    global_buffer_kib: 1\n"
                   "    memory: {bandwidth_gbps: 1}\n")
    p = subprocess.run([sys.executable, "-m", "archsim", "validate", str(cfg)],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2
    assert f"{cfg}:6 units[0].clock_mhz: expected number, got 'fast'" in p.stderr
    assert "Traceback" not in p.stderr


def test_validate_and_list_reference_configs(capsys):
    code, out, _ = run_cli(capsys, "list", "configs")
    assert code == 0 and "configs/spatial/tpu_like.yaml" in out
    paths = [str(ROOT / line) for line in out.split()]
    code, out, err = run_cli(capsys, "validate", *paths)
    assert code == 0, err
    assert out.count("ok ") == len(paths)
