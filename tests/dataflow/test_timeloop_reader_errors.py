"""Bad Timeloop inputs: one error naming the file and key; the CLI exits 2 without traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from archsim.arch.timeloop import read_arch, read_mapping, read_problem
from archsim.cli import main
from archsim.workloads.errors import ConfigError, MappingError

DATA = Path(__file__).resolve().parents[1] / "data" / "timeloop"


def test_unsupported_attribute_names_key(tmp_path: Path) -> None:
    text = (DATA / "eyeriss_like" / "arch.yaml").read_text().replace(
        "      depth: 16384\n", "      depth: 16384\n      multiple_buffering: 2\n")
    p = tmp_path / "arch.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=r"shared_glb|attributes\.multiple_buffering"):
        read_arch(p)


def test_unknown_mapping_target(tmp_path: Path) -> None:
    hier, _ = read_arch(DATA / "eyeriss_like" / "arch.yaml")
    prob = read_problem(DATA / "default_problem.yaml")
    p = tmp_path / "map.yaml"
    p.write_text("mapping:\n  - target: nowhere\n    type: temporal\n    factors: C3\n")
    with pytest.raises(MappingError, match=r"map\.yaml:2 mapping\[0\]\.target"):
        read_mapping(p, hier, prob)


def test_cli_bad_problem_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "prob.yaml"
    p.write_text("problem:\n  shape: {dimensions: [C]}\n  instance: {C: 3, Z: 4}\n")
    rc = main(["map", "--timeloop", str(DATA / "eyeriss_like" / "arch.yaml"), "--problem", str(p)])
    err = capsys.readouterr().err
    assert rc == 2 and "problem.instance.Z" in err and "Traceback" not in err
