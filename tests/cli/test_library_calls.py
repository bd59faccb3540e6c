"""What a command prints is what its library function returns: a script that calls
``run_serving`` / ``search_plans`` / ``evaluate_request`` gets the command's numbers."""

from __future__ import annotations

import json

import archsim
from archsim.cli import main


def test_search_plans_is_archsim_plan(capsys):
    argv = ["plan", "dgx_h100", "--model", "llama3-8b", "--devices", "8", "--batch", "32",
            "--top", "3", "--json"]
    assert main(argv) == 0
    cli = json.loads(capsys.readouterr().out)
    found = archsim.search_plans("dgx_h100", "llama3-8b", 8, batch=32)
    lib = found.to_dict(top=3)
    cli.pop("search_s"), lib.pop("search_s")
    assert lib == cli
    assert found.best is not None and found.best.plan.label() == cli["plans"][0]["plan"]


def test_run_serving_is_archsim_serve(capsys):
    argv = ["serve", "gpu/a100", "--model", "llama2-7b", "--rate", "2", "--duration", "3",
            "--slo", "ttft=2s", "--json"]
    assert main(argv) == 0
    cli = json.loads(capsys.readouterr().out)
    run = archsim.run_serving("gpu/a100", "llama2-7b", rate=2, duration=3, slo="ttft=2s")
    assert run.result is not None and run.capacity_rps is None
    assert json.loads(run.result.to_json()) == cli


def test_evaluate_request_is_archsim_run(capsys):
    assert main(["run", "tpu_like", "--model", "resnet18", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    res = archsim.evaluate_request(archsim.RunRequest(config="tpu_like", model="resnet18"))
    assert json.loads(res.to_json()) == cli
    assert cli["extra"]["provenance"]["argv"][:4] == ["run", "tpu_like", "--model", "resnet18"]
