"""CLI: archsim plan and the parallel flags of archsim run (happy paths and bad input)."""

from __future__ import annotations

import json
from pathlib import Path

from archsim.cli import main

CFG = Path(__file__).resolve().parents[2] / "configs" / "cluster"


def test_run_on_a_cluster(capsys):
    assert main(["run", "dgx_h100", "--model", "llama3-8b", "--tp", "8", "--phase",
                 "prefill", "--seq", "512"]) == 0
    out = capsys.readouterr().out
    assert "plan tp8 on 8 devices" in out and "step breakdown" in out


def test_run_plan_on_a_device_design_json(capsys):
    assert main(["run", "gpu/h100", "--model", "llama3-8b", "--tp", "2", "--pp", "2",
                 "--microbatches", "2", "--batch", "2", "--phase", "train", "--seq", "256",
                 "--recompute", "selective", "--sequence-parallel", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["extra"]["devices"] == 4 and d["latency_s"] > 0
    assert d["extra"]["plan"]["plan"] == "tp2 pp2 mb2 rc-selective sp"


def test_plain_tp_keeps_the_single_graph_path(capsys):
    assert main(["run", "gpu/h100", "--model", "gpt2-small", "--tp", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["extra"]["devices"] == 2 and d["ops"]          # the per-op table of one shard


def test_bad_plan_exits_2_naming_the_key(capsys):
    assert main(["run", "gpu/h100", "--model", "llama3-70b", "--pp", "3"]) == 2
    err = capsys.readouterr().err
    assert "pp:" in err and "80 blocks" in err and "Traceback" not in err


def test_bad_cluster_file_exits_2_with_file_and_line(tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text((CFG / "dgx_h100.yaml").read_text().replace("devices_per_node: 8",
                                                             "devices_per_node: -8"))
    assert main(["run", str(p), "--model", "llama3-8b", "--tp", "8"]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml:" in err and "devices_per_node" in err and "expected a value >= 1" in err


def test_plan_search_json(capsys):
    assert main(["plan", "dgx_h100", "--model", "llama3-8b", "--devices", "8", "--phase",
                 "prefill", "--batch", "8", "--seq", "1024", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["feasible"] > 0 and d["plans"][0]["fits"]
    steps = [p["step_s"] for p in d["plans"]]
    assert steps == sorted(steps)


def test_plan_unknown_design_exits_2(capsys):
    assert main(["plan", "nosuch", "--model", "llama3-8b", "--devices", "8"]) == 2
    err = capsys.readouterr().err
    assert "nosuch" in err and "Traceback" not in err


def test_plan_bad_devices_exits_2(capsys):
    assert main(["plan", "dgx_h100", "--model", "llama3-8b", "--devices", "0"]) == 2
    assert "expected an integer >= 1" in capsys.readouterr().err


def test_plan_of_a_cnn_is_refused(capsys):
    assert main(["run", "dgx_h100", "--model", "resnet50", "--pp", "2"]) == 2
    assert "parallel plans apply to transformers; resnet50 is a CNN" in capsys.readouterr().err


def test_tp_allreduce_without_its_spec_exits_2_naming_the_key(capsys):
    # dgx_a100 has no custom_allreduce spec on its NVLink
    assert main(["plan", "dgx_a100", "--model", "llama3-8b", "--devices", "8", "--phase",
                 "decode", "--tp-allreduce", "custom-graph"]) == 2
    err = capsys.readouterr().err
    assert "scale_up.custom_allreduce" in err and "Traceback" not in err


def test_plan_tp_allreduce_custom_graph(capsys):
    assert main(["run", "dgx_h100", "--model", "llama3-8b", "--tp", "8", "--phase", "decode",
                 "--tp-allreduce", "custom-graph", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)
