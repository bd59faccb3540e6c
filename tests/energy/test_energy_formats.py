"""The arithmetic format table agrees with workloads.formats (storage bits and kind)."""

from __future__ import annotations

import pytest

from archsim.energy import arith

NAMES = ["fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int8", "int6", "int4", "int3", "int2", "ternary", "int1", "mxfp4", "mxint8"]


def test_all_workload_format_names_have_a_model():
    for name in NAMES:
        info = arith.resolve_format(name)
        assert info.bits >= 1 and arith.mac_pj(info) > 0 and arith.mac_um2(info) > 0


def test_bits_and_kind_agree_with_workloads_formats():
    formats = pytest.importorskip("archsim.workloads.formats")
    for name in NAMES:
        fmt = formats.get_format(name)
        info = arith.resolve_format(name)
        assert info.bits == fmt.bits, name
        assert info.kind == fmt.kind or (name == "int1" and fmt.kind in ("int", "binary")), name
