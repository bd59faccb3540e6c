"""`archsim run timeloop:DIR` and `archsim map --timeloop` (archsim/cli/run.py, archsim/timeloop.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archsim.arch.timeloop import read_arch, read_mapping, read_problem
from archsim.cli import main
from archsim.dataflow.nest import analyse

T = Path(__file__).resolve().parents[1] / "data" / "timeloop"


def test_run_folder_prints_timeloop_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", f"timeloop:{T / 'eyeriss_like'}", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # Timeloop's stats.txt: Cycles 86016, DRAM Inputs reads 157296 (see test_timeloop_parity)
    assert out["cycles"] == 86016 and out["accesses"]["DRAM"]["Inputs"]["reads"] == 157296


def test_map_searches_and_saves_a_readable_mapping(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "best.map.yaml"
    arch = T / "simple_weight_stationary" / "arch.yaml"
    rc = main(["map", "--timeloop", str(arch), "--problem", str(T / "default_problem.yaml"),
               "--ert", str(T / "simple_weight_stationary" / "timeloop-mapper.ERT_summary.yaml"),
               "--objective", "energy", "--time-budget", "0.5", "--save-mapping", str(saved)])
    text = capsys.readouterr().out
    assert rc == 0 and text.startswith("Searched ") and "<< compute >>" in text
    hier, _ = read_arch(arch)
    prob = read_problem(T / "default_problem.yaml")
    res = analyse(prob, hier, read_mapping(saved, hier, prob))
    assert res.feasible and res.macs == 10_838_016


def test_bad_budget_and_missing_folder_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", f"timeloop:{T / 'eyeriss_like'}", "--search", "--time-budget", "0"]) == 2
    assert main(["run", "timeloop:/no/such/folder"]) == 2
    err = capsys.readouterr().err
    assert "--time-budget" in err and "no arch.yaml" in err and "Traceback" not in err
