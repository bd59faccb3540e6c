"""Calibration data validated like configs (issue 29, item 4): ``archsim calibrate`` refuses,
in one line naming file:line, non-finite or non-positive times/energies, another device's rows
(unless ``--force``), unknown row kinds (listing the known ones), an empty file, and data
from which no constant has its ``MIN_ROWS_PER_CONSTANT`` rows — and writes no config then."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from archsim.calibration import MIN_ROWS_PER_CONSTANT
from archsim.silicon import ROW_KINDS
from tests.cli.test_bad_inputs import bad, cli
from tests.conftest import ROOT

DATA = ROOT / "tests/data/silicon/h100_calibration.jsonl"
LINES = DATA.read_text().splitlines()
DEV = "NVIDIA H100 80GB HBM3"


def _with(tmp_path: Path, line_no: int, **fields: object) -> Path:
    """The calibration file with row ``line_no`` (1-based) changed by ``fields``."""
    rows = [json.loads(ln) for ln in LINES]
    rows[line_no - 1].update(fields)
    p = tmp_path / "data.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return p


def _refused(capsys, tmp_path: Path, data: Path, needle: str, *extra: str) -> str:
    out = tmp_path / "cal.yaml"
    line = bad(capsys, needle, "calibrate", str(data), "--config", "gpu/h100", "--out", str(out),
               *extra)
    assert not out.exists()
    return line


@pytest.mark.parametrize("field, value", [("ms", float("nan")), ("ms", float("inf")),
                                          ("ms", 0), ("ms", -1.5), ("ms", "fast"),
                                          ("ms", True), ("mj_per_call", -3.0),
                                          ("avg_w", 0.0), ("sm_mhz", float("-inf"))])
def test_non_finite_or_non_positive_measurement(capsys, tmp_path, field, value):
    line = 6 if field != "ms" else 2              # line 6: a sustained GEMM energy row
    p = _with(tmp_path, line, **{field: value})
    msg = _refused(capsys, tmp_path, p, f"{p}:{line}")
    assert field in msg and "finite number > 0" in msg


def test_unknown_kind_is_listed(capsys, tmp_path):
    p = _with(tmp_path, 3, kind="gemmm")
    msg = _refused(capsys, tmp_path, p, f"{p}:3")
    assert "'gemmm'" in msg and all(k in msg for k in ROW_KINDS)


def test_another_devices_rows_need_force(capsys, tmp_path):
    p = _with(tmp_path, 2, device="NVIDIA A100-SXM4-80GB")
    msg = _refused(capsys, tmp_path, p, f"{p}:2")
    assert "A100" in msg and "--force" in msg and "'h100'" in msg
    # the H100 rows against the H200 config: refused on the first row that names a device
    _refused(capsys, tmp_path, DATA, f"{DATA}:1", "--config", "gpu/h200")
    out = tmp_path / "forced.yaml"
    code, _, err = cli(capsys, "calibrate", str(p), "--config", "gpu/h100", "--out", str(out),
                       "--force")
    assert code == 0 and out.exists(), err


def test_matching_device_calibrates(capsys, tmp_path):
    out = tmp_path / "cal.yaml"
    code, text, err = cli(capsys, "calibrate", str(DATA), "--config", "gpu/h100", "--out",
                          str(out))
    assert code == 0 and out.exists() and "warning" not in err
    assert "power.core_energy_scale" in text


@pytest.mark.parametrize("body", ["", "\n\n"])
def test_zero_rows(capsys, tmp_path, body):
    p = tmp_path / "empty.jsonl"
    p.write_text(body)
    assert "no measurement rows" in _refused(capsys, tmp_path, p, str(p))


def test_no_constant_with_enough_rows(capsys, tmp_path):
    """Only the device and launch records and one energy row: the power fit (2 constants)
    needs 2 rows, no GEMM or softmax rows: nothing is fitted, nothing written."""
    assert MIN_ROWS_PER_CONSTANT >= 1
    p = tmp_path / "few.jsonl"
    p.write_text("\n".join(LINES[i] for i in (0, 3, 4, 7)) + "\n")   # device, launch, idle, copy
    msg = _refused(capsys, tmp_path, p, "no constant could be fitted")
    assert f"{MIN_ROWS_PER_CONSTANT} usable row" in msg and "energy" in msg


@pytest.mark.parametrize("ms", ["nan", "inf", "-0.1", "0"])
def test_kernel_table_bad_time(capsys, tmp_path, ms):
    p = tmp_path / "gemm.csv.gz"
    p.write_bytes(gzip.compress(f"dtype,kernel,m,n,k,ms\nbfloat16,x,64,64,64,0.01\n"
                                f"bfloat16,x,64,64,128,{ms}\n".encode()))
    msg = _refused(capsys, tmp_path, p, f"{p}:3")
    assert "ms" in msg


def test_kernel_table_header_only(capsys, tmp_path):
    p = tmp_path / "gemm.csv"
    p.write_text("dtype,kernel,m,n,k,ms\n")
    _refused(capsys, tmp_path, p, "no measurement rows")
