"""Per-data-space element widths in the nest model (dataflow.nest, mapper.nest_kernel):
int8 weights beside 16-bit activations take half a 16-bit word each in capacity, bandwidth
and access energy; counts stay in elements. Expected values in closed form."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from archsim.dataflow.einsum import Einsum, gemm
from archsim.dataflow.hierarchy import ComputeLevel, Hierarchy, StorageLevel
from archsim.dataflow.nest import LevelMapping, NestMapping, analyse
from archsim.mapper.einsum_search import evaluate_batch, from_mapping, make_space


def _hier(buf_words: int | None = None) -> Hierarchy:
    return Hierarchy((StorageLevel("buf", size_words=buf_words, word_bits=16,
                                   energy_pj={"read": 1.0, "write": 2.0, "update": 2.0},
                                   read_bw=1.0),
                      StorageLevel("dram", word_bits=16, technology="DRAM",
                                   energy_pj={"read": 10.0, "write": 10.0, "update": 10.0})),
                     ComputeLevel("mac", 1, {"compute": 0.5}))


def _widths(p: Einsum, bits: dict[str, int]) -> Einsum:
    return replace(p, data_spaces=tuple(replace(ds, word_bits=bits.get(ds.name))
                                        for ds in p.data_spaces))


ALL = frozenset({"A", "B", "Z"})
MAPPING = NestMapping((LevelMapping((("M", 4), ("N", 4), ("K", 4)), (), ALL),
                       LevelMapping((), (), ALL)))


def test_mixed_widths_closed_form() -> None:
    p = gemm(4, 4, 4)                                   # 64 MACs; A, B, Z 16 elements each
    uniform = analyse(p, _hier(), MAPPING)
    mixed = analyse(_widths(p, {"A": 16, "B": 8, "Z": 16}), _hier(), MAPPING)
    for lv in ("buf", "dram"):                          # counts are elements either way
        for ds in ("A", "B", "Z"):
            a, b = uniform.stats[lv][ds], mixed.stats[lv][ds]
            assert (a.reads, a.fills, a.updates) == (b.reads, b.fills, b.updates)
    wb, wu = mixed.stats["buf"]["B"], uniform.stats["buf"]["B"]
    # B at buf: 64 reads (one per MAC) and 16 fills; 8-bit in a 16-bit word: 32 reads x 1 pJ
    # + 8 fills x 2 pJ = 48 pJ, against 64 + 32 = 96 pJ at full width
    assert (wb.reads, wb.fills) == (64, 16)
    assert wb.energy_pj == pytest.approx(48.0) and wu.energy_pj == pytest.approx(96.0)
    # B read from DRAM once: 16 elements = 8 words x 10 pJ
    assert mixed.stats["dram"]["B"].energy_pj == pytest.approx(80.0)
    assert uniform.energy_pj - mixed.energy_pj == pytest.approx(48.0 + 80.0)
    # bandwidth (1 word/cycle at buf): reads A 64 + B 32 + Z 64-16=48 words
    ra, rz = mixed.stats["buf"]["A"].reads, mixed.stats["buf"]["Z"].reads
    assert mixed.level_cycles["buf"] == ra + 32 + rz
    assert uniform.level_cycles["buf"] == ra + 64 + rz


def test_capacity_counts_words_of_each_width() -> None:
    p = gemm(4, 4, 4)
    # tiles: A 16 + B 16 + Z 16 = 48 words at 16 bits; with 8-bit B: 16 + 8 + 16 = 40
    assert not analyse(p, _hier(40), MAPPING).feasible
    assert analyse(_widths(p, {"A": 16, "B": 8, "Z": 16}), _hier(40), MAPPING).feasible


def test_kernel_counts_widths_as_analyse() -> None:
    p = _widths(gemm(4, 4, 4), {"A": 16, "B": 8, "Z": 16})
    space = make_space(p, _hier(40))
    out = evaluate_batch(space, from_mapping(space, [MAPPING]))
    ref = analyse(p, _hier(40), MAPPING)
    assert bool(out["feasible"][0]) and int(out["cycles"][0]) == ref.cycles
    assert float(out["energy_pj"][0]) == pytest.approx(ref.energy_pj, rel=1e-12)
    assert np.isfinite(out["energy_pj"][0])
