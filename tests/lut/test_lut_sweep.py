"""Weight-bit sweep (arch.lut.weight_bit_sweep): bit-serial scaling and the LUT/MAC crossing."""

from __future__ import annotations

import math

import pytest

import archsim
from archsim.arch.lut import table_entries, weight_bit_sweep


@pytest.fixture(scope="module")
def rows():
    return weight_bit_sweep(archsim.load("lut/a100_lut4x").units[0],
                            archsim.load("gpu/a100").units[0])


def test_lut_density_falls_as_one_over_w(rows):
    d1 = rows[0]["lut_density"]
    for r in rows:
        assert r["lut_density"] == pytest.approx(d1 / r["w_bits"], rel=1e-9)


def test_mac_density_is_independent_of_weight_width(rows):
    assert len({round(r["mac_int8_density"], 9) for r in rows}) == 1


def test_symmetrisation_halves_table_and_raises_density(rows):
    assert table_entries(4, symmetric=True) * 2 == table_entries(4, symmetric=False)
    assert all(r["lut_density"] > r["lut_nosym_density"] for r in rows)


def test_crossing_with_int8_mac_near_paper(rows):
    """Paper (Mo et al. ISCA'25): LUT ahead of MAC up to about 6-bit weights. Ours must
    be within one bit."""
    ahead = [int(r["w_bits"]) for r in rows if r["lut_density"] > r["mac_int8_density"]]
    assert ahead == list(range(1, max(ahead) + 1))
    assert abs(max(ahead) - 6) <= 1


def test_kernel_latency_grows_with_weight_bits(rows):
    ms = [r["lut_ms"] for r in rows if not math.isnan(r["lut_ms"])]
    assert ms == sorted(ms)
