"""benchmarks/peer_ramulator2.py without the peer's binary: address re-encoding, trace and
config writing, the output parsers, and the one-line exit 2 when ``--ramulator`` is bad.

No timing here (STYLE.md: speed lives in benchmarks/)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from archsim.sim import dram_preset
from archsim.sim.dram import encode_address

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "peer_ramulator2.py"
_SPEC = importlib.util.spec_from_file_location("peer_ramulator2", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
peer = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = peer  # (its dataclasses look their module up there)
_SPEC.loader.exec_module(peer)

PEERS = {p.ours: p for p in peer.PEERS}


def _ramulator_fields(addr: np.ndarray, tx_bits: int, ch_bits: int, col_bits: int,
                      level_bits: list[int]) -> list[np.ndarray]:
    """What Ramulator 2's CacheLineInterleave (channel = the bits just above the
    transaction offset, removed from the address) and RoBaRaCoCh (column lowest, then each
    level in turn) read from a byte address, written out as bit slices:
    [channel, column, level 0, level 1, ...]."""
    a = np.asarray(addr, np.int64)
    ch = (a >> tx_bits) & ((1 << ch_bits) - 1)
    rest = a >> (tx_bits + ch_bits)  # (the offset bits below are dropped by >> tx_bits)
    out = [ch, rest & ((1 << col_bits) - 1)]
    rest = rest >> col_bits
    for b in level_bits:
        out.append(rest & ((1 << b) - 1))
        rest = rest >> b
    return out


@pytest.mark.parametrize("name", ["DDR4-2400", "HBM2e", "GDDR6"])
def test_decode_inverts_our_encode_address(name: str) -> None:
    spec = dram_preset(name)
    coords = [dict(channel=spec.channels - 1, bankgroup=1, bank=3, row=5, column=2),
              dict(channel=0, bankgroup=3, bank=0, row=spec.rows - 1,
                   column=spec.bursts_per_row - 1)]
    addr = np.array([encode_address(spec, **c) for c in coords], np.int64)
    f = peer.decode(spec, addr)
    for i, c in enumerate(coords):
        assert (f["ch"][i], f["bg"][i], f["ba"][i], f["ro"][i], f["co"][i], f["ra"][i]) == (
            c["channel"], c["bankgroup"], c["bank"], c["row"], c["column"], 0)


def test_peer_address_ddr4_by_hand() -> None:
    """DDR4-2400 (64 B bursts, 1 channel, 128 bursts a row, 4 BG, 4 banks): bank group 1,
    bank 3, row 5, burst 2. Ramulator's layout from the LSB: 6 offset bits, no channel bits,
    7 column bits, no rank bits, 2 bank-group bits, 2 bank bits, the row:
    ((((5 * 4 + 3) * 4 + 1) * 128 + 2) * 64 = ((93 * 128) + 2) * 64 = 761,984."""
    spec = dram_preset("DDR4-2400")
    ours = encode_address(spec, bankgroup=1, bank=3, row=5, column=2)
    assert peer.peer_address(spec, PEERS["DDR4-2400"], np.array([ours]))[0] == 761_984


def test_peer_address_hbm2e_by_hand() -> None:
    """HBM2e (32 B bursts, 16 channels, 32 bursts a row): channel 3, bank group 2, bank 1,
    row 7, burst 5. From the LSB: 5 offset bits, 4 channel bits, 5 column bits, no
    pseudo-channel bits (one per channel), 2 + 2 bank bits, the row:
    (((((7 * 4 + 1) * 4 + 2) * 32 + 5) * 16 + 3) * 32 = (60,499) * 32 = 1,935,968."""
    spec = dram_preset("HBM2e")
    ours = encode_address(spec, channel=3, bankgroup=2, bank=1, row=7, column=5)
    assert peer.peer_address(spec, PEERS["HBM2e"], np.array([ours]))[0] == 1_935_968


@pytest.mark.parametrize("name", ["DDR4-2400", "HBM2e", "GDDR6"])
def test_peer_sees_the_bank_row_column_we_see(name: str) -> None:
    """Random bursts: Ramulator's bit slices of the re-encoded address are our decode."""
    spec, p = dram_preset(name), PEERS[name]
    rng = np.random.default_rng(1)
    addr = rng.integers(0, spec.capacity_bytes() // spec.burst_bytes, 500) * spec.burst_bytes
    ours = peer.decode(spec, addr)

    def bits(n: int) -> int:  # (every size here is a power of two)
        assert n & (n - 1) == 0
        return int(n).bit_length() - 1

    size = {"ra": spec.ranks, "bg": spec.bankgroups, "ba": spec.banks, "ro": spec.rows}
    levels = [bits(size[field]) if field else 0 for _, field in p.levels]
    got = _ramulator_fields(peer.peer_address(spec, p, addr), bits(spec.burst_bytes),
                            bits(spec.channels), bits(spec.bursts_per_row), levels)
    np.testing.assert_array_equal(got[0], ours["ch"])
    np.testing.assert_array_equal(got[1], ours["co"])
    for (_, field), g in zip(p.levels, got[2:]):
        np.testing.assert_array_equal(g, ours[field] if field else 0)


def test_trace_round_trips(tmp_path: Path) -> None:
    addr = np.array([0, 64, 2**33 + 128, 761_984], np.int64)
    wr = np.array([False, True, False, True])
    path = tmp_path / "t.trace"
    peer.write_trace(path, addr, wr)
    assert path.read_text().splitlines()[:2] == ["LD 0", "ST 64"]
    a2, w2 = peer.read_trace(path)
    np.testing.assert_array_equal(a2, addr)
    np.testing.assert_array_equal(w2, wr)


def test_timing_overrides_use_our_values_under_their_names() -> None:
    """DDR4: our nRCDRD = nRCDWR = 16 becomes their one nRCD; every other timing keeps its
    name; tCK_ps is ours (833)."""
    spec, p = dram_preset("DDR4-2400"), PEERS["DDR4-2400"]
    theirs = ["rate", "nBL", "nCL", "nRCD", "nRP", "nRAS", "nRC", "nWR", "nRTP", "nCWL",
              "nCCDS", "nCCDL", "nRRDS", "nRRDL", "nWTRS", "nWTRL", "nFAW", "nRFC", "nREFI",
              "nCS", "tCK_ps"]
    over, missing = peer.timing_overrides(spec, p, theirs)
    assert missing == []
    assert over["nRCD"] == spec.timing["nRCDRD"] == 16
    assert over["nREFI"] == 9363 and over["tCK_ps"] == 833 and "rate" not in over
    text = peer.config_script(spec, p, over, None)
    assert "nRCD=16" in text and "range(1)" in text and "External(clock_ratio=1)" in text
    assert "read_buffer_size=32, write_buffer_size=32" in text and "Open()" in text
    text = peer.config_script(spec, p, over, Path("/x/c"), Path("/x/t.trace"))
    assert "LoadStoreTrace(clock_ratio=1, path='/x/t.trace')" in text
    assert "CommandCounter" in text and "/x/c" in text


SAMPLE = """archsim-peer: requests=10 completed=10 cycles=1234 loop_cpu_s=0.012500
MemorySystem:
  impl: GenericDRAM
  total_num_read_requests: 7
  controller:
    - impl: GenericDDR
      id: Channel 0
      row_hits: 3
      row_misses: 1
      row_conflicts: 2
      num_read_reqs_served: 4
      num_write_reqs_served: 2
      avg_read_latency: 45.5
    - impl: GenericDDR
      id: Channel 1
      row_hits: 1
      row_misses: 2
      row_conflicts: 1
      num_read_reqs_served: 3
      num_write_reqs_served: 1
"""


def test_parse_output_sums_the_controllers() -> None:
    r = peer.parse_output(SAMPLE)
    assert (r.requests, r.completed, r.cycles, r.loop_cpu_s) == (10, 10, 1234, 0.0125)
    assert r.stats["row_hits"] == 3 + 1 and r.stats["row_conflicts"] == 2 + 1
    assert r.stats["num_read_reqs_served"] + r.stats["num_write_reqs_served"] == 10
    with pytest.raises(peer.PeerError, match="--ramulator"):
        peer.parse_output("no summary")


def test_parse_counts_sums_the_channel_csvs(tmp_path: Path) -> None:
    (tmp_path / "ch0.csv").write_text("ACT, 5\nRD, 7\n")
    (tmp_path / "ch1.csv").write_text("RD, 3\nREFab, 1\n\n")
    got = peer.parse_counts(sorted(tmp_path.glob("ch*.csv")))
    assert got == {"ACT": 5, "RD": 10, "REFab": 1}


def test_bad_ramulator_path_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    assert peer.main(["--ramulator", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--ramulator" in err
    assert "Traceback" not in err
    (tmp_path / "libramulator.so").write_text("")  # a library, but no build around it
    assert peer.main(["--ramulator", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--ramulator" in err
    assert peer.main(["--ramulator", str(tmp_path), "--requests", "3"]) == 2
    assert "--requests" in capsys.readouterr().err
