"""Resource formulas of arch/fpga/resources.py, each checked by hand arithmetic."""

from __future__ import annotations

import pytest

from archsim.arch.fpga import resources as rs
from archsim.arch.fpga.resources import Resources


@pytest.mark.parametrize("m, luts", [
    (1, 0.0),    # no choice, no mux
    (2, 0.5),    # two 2:1 bits with a shared select = 5 inputs -> one LUT6_2
    (4, 1.0),    # LUT6 = 4 data + 2 select inputs
    (8, 2.0),    # 2 LUT6 + F7MUX
    (16, 4.0),   # 4 LUT6 + F7MUX + F8MUX
    (32, 8.5),   # two 16:1 (4 LUT each) + a 2:1 level (0.5)
])
def test_mux_luts_per_bit(m: int, luts: float) -> None:
    assert rs.mux_luts_per_bit(m) == luts


def test_index_bits() -> None:
    assert [rs.index_bits(m) for m in (1, 2, 4, 8, 16)] == [0, 1, 2, 3, 4]


def test_bram36_sdp_64kib_x64() -> None:
    # 64 KiB = 524288 bits, width 64 -> depth 8192. 512x72: 1 x 16; 1Kx36: 2 x 8; 2Kx18: 4 x 4;
    # 4Kx9: 8 x 2; 8Kx4: 16 x 1 -> 16 blocks (capacity alone would allow 524288/36864 -> 15).
    assert rs.bram36_blocks(64 * 1024 * 8, 64, ports=1) == 16


def test_bram36_tdp_cannot_use_x72() -> None:
    # 64 KiB at 72 bits: depth ceil(524288/72) = 7282. SDP 512x72: 1 x ceil(7282/512) = 15.
    # TDP (max 36 wide): 1Kx36: 2 x 8 = 16, 2Kx18: 4 x 4 = 16, 4Kx9: 8 x 2 = 16 -> 16.
    assert rs.bram36_blocks(64 * 1024 * 8, 72, ports=1) == 15
    assert rs.bram36_blocks(64 * 1024 * 8, 72, ports=2) == 16


def test_bram36_sat_out_buffer() -> None:
    # 2 MiB x 768 bits: depth ceil(16777216/768) = 21846. 512x72: 11 x 43 = 473;
    # 1Kx36: 22 x 22 = 484; 2Kx18: 43 x 11 = 473; 4Kx9: 86 x 6 = 516 -> 473.
    assert rs.bram36_blocks(2 * 1024 * 1024 * 8, 768) == 473


def test_uram_blocks() -> None:
    # 4 MiB x 4096 bits: depth 8192 -> ceil(4096/72) = 57 wide x 2 deep = 114.
    assert rs.uram_blocks(4 * 1024 * 1024 * 8, 4096) == 114
    # 2 MiB x 1024 bits: depth 16384 -> 15 x 4 = 60.
    assert rs.uram_blocks(2 * 1024 * 1024 * 8, 1024) == 60
    # a tiny buffer still takes one block
    assert rs.uram_blocks(8, 8) == 1


@pytest.mark.parametrize("fmt, adder, expected", [
    ("fp16", "dsp", Resources(dsp=1 + 2, lut=70 + 180, ff=110 + 300)),
    ("fp16", "logic", Resources(dsp=1, lut=70 + 400, ff=110 + 550)),
    ("bf16", "dsp", Resources(dsp=1 + 2, lut=60 + 180, ff=100 + 300)),
    ("int8", "dsp", Resources(dsp=0.5, lut=10, ff=20)),        # DSP post-adder accumulates
    ("int8", "logic", Resources(dsp=0.5, lut=10 + 32, ff=20 + 32)),
])
def test_mac_cost(fmt: str, adder: str, expected: Resources) -> None:
    assert rs.mac_cost(fmt, adder) == expected


def test_topn_selector() -> None:
    # 4-of-8 on fp16: 4 passes x 7 comparators x 16 LUT = 448 LUT; FF = 448 (stage
    # registers) + 4 x (16 value + 3 index bits) = 524.
    assert rs.topn_selector(4, 8, 16) == Resources(lut=448, ff=524)


def test_resources_arithmetic_and_rounding() -> None:
    r = Resources(dsp=0.5, lut=1.2) * 3 + Resources(ff=2)
    assert r == Resources(dsp=1.5, lut=pytest.approx(3.6), ff=2)
    assert r.rounded() == Resources(dsp=2, lut=4, ff=2)


def test_exceeded_names_the_resource() -> None:
    part = Resources(dsp=6840, lut=1182240, ff=2364480, bram36=2160, uram=960)
    assert rs.exceeded(Resources(dsp=7200), part) == ["dsp: 7200 needed > 6840 available"]
    assert rs.exceeded(Resources(dsp=6000, uram=900), part, 0.8) == [
        "dsp: 6000 needed > 5472 usable at 80%", "uram: 900 needed > 768 usable at 80%"]
    assert rs.exceeded(Resources(dsp=6840), part) == []
