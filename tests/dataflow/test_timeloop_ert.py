"""Timeloop architectures priced without an ERT by archsim's energy library
(arch/timeloop/ert.py), against Accelergy's ERTs and Timeloop's totals (docs/timeloop.md,
"Energy without an ERT")."""

from __future__ import annotations

from pathlib import Path

import pytest

from archsim.arch.timeloop import (
    arch_ert,
    read_arch,
    read_ert,
    read_mapping,
    read_problem,
    read_stats,
)
from archsim.cli import main
from archsim.dataflow.nest import analyse
from archsim.workloads.errors import ConfigError

T = Path(__file__).resolve().parents[1] / "data" / "timeloop"
REF = Path(__file__).resolve().parents[2] / "examples" / "timeloop"
DESIGNS = ("eyeriss_like", "simba_like", "simple_output_stationary", "simple_weight_stationary")


def _pairs(design: str) -> list[tuple[str, str, str, float, float]]:
    """(component, class, action, derived pJ, Accelergy pJ) of every priced action."""
    ref = read_ert(T / design / "timeloop-mapper.ERT_summary.yaml")
    out = []
    for e in arch_ert(T / design / "arch.yaml").entries:
        for act, pj in e.energy_pj.items():
            if act != "leak":
                out.append((e.name, e.timeloop_class, act, pj, ref[e.name][act]))
    return out


def test_closed_forms() -> None:
    # DRAM (LPDDR4, energy.tables: 5 pJ/bit): one 64-bit block = 5 x 64 = 320 pJ
    simple = {e.name: e for e in arch_ert(T / "simple_output_stationary" / "arch.yaml").entries}
    assert simple["DRAM"].energy_pj["read"] == pytest.approx(320.0)
    # pe_spad: SRAM of 192 x 16 b = 384 B at 45 nm: Horowitz's 8 KB point (10 pJ / 64 b) on
    # the E ~ C^0.5 segment: 10 x (384 / 8192)^0.5 x 16 / 64 = 0.5413 pJ
    assert simple["pe_spad"].energy_pj["read"] == pytest.approx(10 * (384 / 8192) ** 0.5 / 4)
    # a depth-1 register is read without a mux; written: 16 DFFs
    assert simple["weight_reg"].energy_pj["read"] == 0.0
    # int8 x int8 multiply (0.2 pJ) + int16 add (0.05 pJ), Horowitz at 45 nm
    assert simple["mac"].energy_pj["compute"] == pytest.approx(0.25)
    # no global_cycle_seconds in the file: no clock, so no leakage energy per cycle
    assert all(e.energy_pj["leak"] == 0.0 for e in simple.values())


def test_dram_is_the_library_lpddr4_figure() -> None:
    # Accelergy's CACTI-DRAM LPDDR4 is 8 pJ/bit (512 pJ / 64 b); energy.tables has 5 pJ/bit
    for d in DESIGNS:
        for name, _, _, ours, ref in _pairs(d):
            if name == "DRAM":
                assert ours / ref == pytest.approx(5.0 / 8.0)


@pytest.mark.parametrize("cls, action, lo, hi", [
    ("intmac", "compute", 0.75, 1.25),          # 0.25 vs 0.315 pJ
    ("smartbuffer_SRAM", "read", 0.75, 4.5),    # 1-port 64 b 0.80-1.18; 2-port 256 b 4.3
    ("smartbuffer_RF", "read", 0.75, 2.0),      # flip-flop mux tree, depth >= 2: 0.81-1.78
])
def test_45nm_actions_within_stated_bands(cls: str, action: str, lo: float, hi: float) -> None:
    ratios = [ours / ref for d in DESIGNS[1:] for _, c, a, ours, ref in _pairs(d)
              if c == cls and a == action and ours > 0]
    assert ratios and all(lo <= r <= hi for r in ratios), ratios


def test_65nm_is_above_the_reference() -> None:
    # eyeriss_like is at 65 nm: Stillmaker scaling raises every on-chip energy above the 45 nm
    # value, while the reference's 65 nm values are *below* its own 45 nm ones (e.g. MAC
    # 0.208 vs 0.315 pJ); every derived read and compute is 1.7-5.1x the reference
    for name, _, act, ours, ref in _pairs("eyeriss_like"):
        if name != "DRAM" and act in ("read", "compute"):
            assert 1.5 <= ours / ref <= 5.5


def _same_mapping_error(design: str) -> float:
    prob = read_problem(T / "default_problem.yaml")
    hier, _ = read_arch(T / design / "arch.yaml")          # no ERT: derived
    res = analyse(prob, hier, read_mapping(T / design / "timeloop-mapper.map.yaml", hier, prob))
    ref = read_stats(T / design / "timeloop-mapper.stats.txt").energy_uj
    return res.energy_pj / 1e6 / ref - 1.0


@pytest.mark.parametrize("design", ["simba_like", "simple_weight_stationary"])
def test_total_within_25_percent(design: str) -> None:
    assert abs(_same_mapping_error(design)) <= 0.25


@pytest.mark.xfail(strict=True, reason="outside 25% (docs/timeloop.md): eyeriss_like +54% "
                   "(65 nm scaling vs the reference's cheaper 65 nm tables), "
                   "simple_output_stationary -35% (DRAM 62% of its energy, 5 vs 8 pJ/bit)")
@pytest.mark.parametrize("design", ["eyeriss_like", "simple_output_stationary"])
def test_total_within_25_percent_open(design: str) -> None:
    assert abs(_same_mapping_error(design)) <= 0.25


def test_show_ert_prints_values_and_sources(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["map", "--timeloop", str(REF / "eyeriss_like" / "arch.yaml"), "--problem",
               str(REF / "default_problem.yaml"), "--mapping",
               str(REF / "eyeriss_like" / "timeloop-mapper.map.yaml"), "--show-ert"])
    out = capsys.readouterr().out
    assert rc == 0 and "Energy reference table (derived" in out
    assert "sram 131072 B x 64 b, 1 port(s) at 65 nm (arch.yaml:" in out
    assert "Energy: 0.00 uJ" not in out and "Energy: " in out


def test_unpriceable_class_names_it_and_the_line(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    text = (T / "eyeriss_like" / "arch.yaml").read_text().replace(
        "    class: intmac\n", "    class: compute\n")
    p = tmp_path / "arch.yaml"
    p.write_text(text)
    line = text.splitlines().index("    class: compute") + 1
    with pytest.raises(ConfigError, match=rf"arch\.yaml:{line} mac\.class: archsim cannot "
                                          r"price component class 'compute'"):
        read_arch(p)
    rc = main(["map", "--timeloop", str(p), "--problem", str(T / "default_problem.yaml")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "'compute'" in err
    assert "Traceback" not in err


def test_bad_technology_names_the_component(tmp_path: Path) -> None:
    text = (T / "eyeriss_like" / "arch.yaml").read_text().replace('"65nm"', '"sixty-five"')
    p = tmp_path / "arch.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=r"shared_glb.*technology"):
        read_arch(p)
