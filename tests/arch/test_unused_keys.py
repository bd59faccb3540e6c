"""Design keys a unit ignores (issue 29, item 2): a key written in a design file that the
unit's model never reads, given the other values, loads with one ``warning:`` line naming
``FILE:LINE key.path`` (:class:`archsim.arch.spec.UnusedKeyWarning`, a spec's ``unused()``);
a key that cannot be valid stays an error; a default is never reported. The expected lines
are found in the text each test writes (the line of the key), not taken from the loader."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from archsim.api import find_config, load
from archsim.arch.spec import UnusedKeyWarning
from archsim.workloads.errors import ConfigError
from tests.cli.test_bad_inputs import cli

ROOT = Path(__file__).resolve().parents[2]


def _edit(tmp_path: Path, design: str, old: str, new: str) -> tuple[Path, str]:
    """A copy of ``design`` with ``old`` replaced by ``new`` (both exact text)."""
    text = find_config(design).read_text()
    assert text.count(old) == 1, old
    p = tmp_path / f"{design.replace('/', '_')}.yaml"
    p.write_text(text.replace(old, new))
    return p, p.read_text()


def _line(text: str, needle: str) -> int:
    """1-based line of the only line containing ``needle``."""
    hits = [i + 1 for i, ln in enumerate(text.splitlines()) if needle in ln]
    assert len(hits) == 1, needle
    return hits[0]


def _unused(path: Path, overrides: tuple[str, ...] = ()) -> list[str]:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        load(path, list(overrides))
    return [str(w.message) for w in got if issubclass(w.category, UnusedKeyWarning)]


def test_gpu_has_no_command_level_dram(tmp_path):
    """The GPU families stream HBM through a bandwidth server at every fidelity
    (arch/gpu/lower.py): model: dram and its preset are never read."""
    p, text = _edit(tmp_path, "gpu/h100", "    memory:\n",
                    "    memory:\n      model: dram\n      preset: HBM3\n")
    got = _unused(p)
    assert got == [
        f"{p}:{_line(text, 'model: dram')} units[0].memory.model: the GPU families have no "
        f"command-level DRAM model; the memory is a bandwidth server (bandwidth_gbps x "
        f"efficiency) at every fidelity; ignored",
        f"{p}:{_line(text, 'preset: HBM3')} units[0].memory.preset: the GPU families have no "
        f"command-level DRAM model; the memory is a bandwidth server (bandwidth_gbps x "
        f"efficiency) at every fidelity; ignored"]


def test_lut_gpu_inherits_the_gpu_memory_rule(tmp_path):
    p, text = _edit(tmp_path, "lut/a100_lut4x", "    memory:\n",
                    "    memory:\n      model: dram\n      preset: HBM2e\n")
    got = _unused(p)
    assert len(got) == 2 and got[0].startswith(
        f"{p}:{_line(text, 'model: dram')} units[0].memory.model: the GPU families")


@pytest.mark.parametrize("design", ["tpu_like", "fpga/sat_vcu1525"])
def test_dram_preset_of_a_bandwidth_memory(tmp_path, design):
    """Spatial arrays and the FPGA read ``preset`` only with ``model: dram``."""
    p, text = _edit(tmp_path, design, "    memory:\n", "    memory:\n      preset: DDR4-2400\n")
    assert _unused(p) == [
        f"{p}:{_line(text, 'preset: DDR4-2400')} units[0].memory.preset: a sim.dram preset is "
        f"read only with model: dram; this memory is model: bandwidth (bandwidth_gbps x "
        f"efficiency); ignored"]
    # with model: dram the same preset is read (arch/spatial/lower.py, arch/fpga/lower.py)
    p2, _ = _edit(tmp_path, design, "    memory:\n",
                  "    memory:\n      model: dram\n      preset: DDR4-2400\n")
    assert _unused(p2) == []


def test_sparse_patterns_without_sparse_pes(tmp_path):
    """A dense-only FPGA (``sparse.enabled: false``) has no selection muxes and no weight
    pre-generator: its N:M patterns never run and ``pregen`` is never read; without those
    keys nothing is said (the defaults are not reported)."""
    p, text = _edit(tmp_path, "fpga/sat_vcu1525", "      enabled: true\n",
                    "      enabled: false\n")
    got = _unused(p)
    assert got == [f"{p}:{_line(text, 'patterns: [')} units[0].sparse.patterns: enabled: false "
                   f"is a dense-only design with no sparse datapath (m_max = 1); its N:M "
                   f"patterns never run; ignored",
                   f"{p}:{_line(text, 'pregen:')} units[0].pregen: sparse.enabled: false has "
                   f"no sparse weights to pre-generate (no generator resources, no "
                   f"pre-generation time); ignored"]
    line = next(ln for ln in text.splitlines() if "patterns: [" in ln)
    block = "\n".join(ln for ln in text.splitlines()
                      if "pregen:" in ln or "lanes: 16 " in ln or "overlap: true" in ln) + "\n"
    p2, _ = _edit(tmp_path, "fpga/sat_vcu1525", "      enabled: true\n" + line + "\n",
                  "      enabled: false\n")
    p2.write_text(p2.read_text().replace(block, ""))
    assert _unused(p2) == []


def test_override_names_set(tmp_path):
    """An override that writes an unread key is named as ``--set``, like its other
    problems."""
    assert _unused(find_config("tpu_like"), ("units[0].memory.preset=HBM2e",)) == [
        "--set units[0].memory.preset: a sim.dram preset is read only with model: dram; this "
        "memory is model: bandwidth (bandwidth_gbps x efficiency); ignored"]


def test_key_that_cannot_be_valid_is_an_error(tmp_path):
    p, text = _edit(tmp_path, "gpu/h100", "    memory:\n", "    memory:\n      banks: 16\n")
    with pytest.raises(ConfigError) as exc:
        load(p)
    assert f"{p}:{_line(text, 'banks: 16')} units[0].memory.banks: unknown key 'banks'" in \
        str(exc.value)


@pytest.mark.parametrize("path", sorted(p for p in (ROOT / "configs").glob("*/*.yaml")
                                if p.parent.name != "cluster"),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_shipped_designs_have_no_unread_keys(path):
    assert _unused(path) == []


def test_cli_prints_one_line(capsys, tmp_path):
    p, text = _edit(tmp_path, "tpu_like", "    memory:\n", "    memory:\n      preset: HBM2e\n")
    code, _, err = cli(capsys, "gemm", str(p), "--m", "64", "--n", "64", "--k", "64")
    assert code == 0
    assert err.splitlines() == [f"warning: {p}:{_line(text, 'preset: HBM2e')} "
                                f"units[0].memory.preset: a sim.dram preset is read only with "
                                f"model: dram; this memory is model: bandwidth (bandwidth_gbps "
                                f"x efficiency); ignored"]
