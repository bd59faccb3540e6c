"""Input files that would hang or flood a run are refused before reading (issue 29, items 3
and the garbage-config regression): a FIFO, a device, an oversized file, binary garbage —
each one line naming the file, exit 2, within seconds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from archsim.cli import main
from archsim.workloads.yamlio import MAX_INPUT_BYTES


def _one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_binary_garbage_config(capsys, tmp_path):
    g = tmp_path / "garbage.yaml"
    g.write_bytes(bytes(range(128, 256)) * 20)
    assert main(["run", str(g)]) == 2
    line = _one_error(capsys)
    assert str(g) in line and "not a text file" in line


def test_fifo_config_is_refused_without_reading(capsys, tmp_path):
    f = tmp_path / "design.yaml"
    os.mkfifo(f)                      # opening it for reading would block forever
    assert main(["run", str(f)]) == 2
    assert "is a FIFO" in _one_error(capsys)


def test_device_config_is_refused(capsys):
    assert main(["run", "/dev/zero"]) == 2
    assert "/dev/zero" in _one_error(capsys)


@pytest.mark.parametrize("cmd", [["run"], ["validate"]])
def test_oversized_config_names_the_cap(capsys, tmp_path, cmd):
    big = tmp_path / "big.yaml"
    with open(big, "w") as fh:
        fh.write("units: []\n")
        fh.write("# pad\n" * (MAX_INPUT_BYTES // 6 + 1))
    assert main([*cmd, str(big)]) == 2
    line = _one_error(capsys)
    assert "limited to 4 MiB" in line and str(big) in line


def test_yaml_merge_key_override_is_not_a_duplicate():
    """YAML merge keys (``<<: *base``) then an override: the mapping's own value wins, as in
    the YAML merge-key spec (and PyYAML's own loader); a key written twice is still an error."""
    from archsim.workloads.yamlio import parse_yaml_text

    data, problems = parse_yaml_text("base: &b {rows: 8, cols: 4}\nu:\n  <<: *b\n  rows: 16\n",
                                     "m.yaml")
    assert problems == [] and dict(data["u"]) == {"rows": 16, "cols": 4}
    data, problems = parse_yaml_text("a: &a {p: 1}\nb: &b {p: 2, q: 3}\nu:\n  <<: [*a, *b]\n",
                                     "m.yaml")
    assert problems == [] and dict(data["u"]) == {"p": 1, "q": 3}     # first source wins
    _, problems = parse_yaml_text("u:\n  rows: 1\n  rows: 2\n", "m.yaml")
    assert [str(p) for p in problems] == ["m.yaml:3 rows: duplicate key 'rows' (first at line 2)"]


def test_csv_trace_with_a_utf8_bom(tmp_path):
    """Spreadsheets save CSV with a UTF-8 byte-order mark; it is not part of the header."""
    from archsim.serve.requests import load_trace

    t = tmp_path / "trace.csv"
    t.write_bytes("\ufeffarrival_s,prompt_tokens,output_tokens\n0.0,128,16\n0.5,64,8\n"
                  .encode("utf-8"))
    reqs = load_trace(t)
    assert [(r.prompt_tokens, r.output_tokens) for r in reqs] == [(128, 16), (64, 8)]


def test_empty_design_name(capsys):
    assert main(["gemm", "", "--m", "8", "--n", "8", "--k", "8"]) == 2
    line = _one_error(capsys)
    assert "empty design name" in line and "tpu_like" in line


def test_absurd_unit_count_is_refused(capsys, tmp_path):
    import yaml

    from archsim.arch.accelerator import MAX_UNITS

    root = Path(__file__).resolve().parents[2]
    d = yaml.safe_load((root / "configs/spatial/tpu_like.yaml").read_text())
    d["units"] = [dict(d["units"][0], name=f"u{i}") for i in range(MAX_UNITS + 1)]
    cfg = tmp_path / "many.yaml"
    cfg.write_text(yaml.safe_dump(d))
    assert main(["run", str(cfg)]) == 2
    line = _one_error(capsys)
    assert f"{MAX_UNITS + 1} units" in line and f"at most {MAX_UNITS}" in line
