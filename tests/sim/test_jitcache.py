"""sim/jitcache.py: cached kernels never outlive a change to a file they embed."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from archsim.sim import jitcache
from archsim.sim.jitcache import KERNEL_SOURCES, STAMP_NAME, guard, source_digest

ROOT = Path(jitcache.__file__).resolve().parent.parent


def _dispatcher(folder: Path) -> SimpleNamespace:
    """Stands in for a Numba dispatcher whose entries Numba caches in ``folder``."""
    return SimpleNamespace(_cache=SimpleNamespace(_cache_path=str(folder)))


def _entries(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.suffix in (".nbi", ".nbc")}


def test_every_kernel_source_exists_and_every_cached_kernel_file_is_listed():
    for rel in KERNEL_SOURCES:
        assert (ROOT / rel).is_file(), rel
    cached = {str(p.relative_to(ROOT)) for sub in ("sim", "arch", "mapper")
              for p in (ROOT / sub).rglob("*.py") if "cache=True" in p.read_text()}
    assert cached <= set(KERNEL_SOURCES)


def test_digest_follows_any_kernel_source(tmp_path):
    for rel in KERNEL_SOURCES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    base = source_digest(tmp_path)
    assert base == source_digest(ROOT) and len(base) == 40
    for rel in ("sim/dram_kernel.py", "sim/dram_presets.py"):  # a callee, a frozen constant
        text = (tmp_path / rel).read_text()
        (tmp_path / rel).write_text(text + "\n# edited\n")
        assert source_digest(tmp_path) != base
        (tmp_path / rel).write_text(text)
        assert source_digest(tmp_path) == base


def test_guard_drops_entries_only_when_the_sources_changed(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    names = ["engine._kernel-152.py311.nbi", "engine._kernel-152.py311.1.nbc", "engine.cpython-311.pyc"]
    for n in names:
        (folder / n).write_bytes(b"x")
    d = _dispatcher(folder)
    assert guard(d, digest="a" * 40)                      # no stamp yet: dropped
    assert _entries(folder) == set() and (folder / names[2]).exists()   # .pyc kept
    assert (folder / STAMP_NAME).read_text().strip() == "a" * 40
    (folder / names[0]).write_bytes(b"x")                 # compiled again from "a"
    assert not guard(d, digest="a" * 40)                  # same sources: kept
    assert _entries(folder) == {names[0]}
    assert guard(d, digest="b" * 40)                      # a kernel file changed: dropped
    assert _entries(folder) == set()
    assert not list(folder.glob("*.tmp"))


def test_guard_without_a_cache_does_nothing(tmp_path):
    assert not guard(SimpleNamespace(), digest="a" * 40)
    fresh = tmp_path / "absent" / "x"                      # Numba has not written it yet
    assert not guard(_dispatcher(fresh), digest="a" * 40)
    assert (fresh / STAMP_NAME).read_text().strip() == "a" * 40


def test_importing_the_kernels_stamps_their_cache_with_the_current_sources():
    pytest.importorskip("numba")
    from archsim.sim import engine

    folder = getattr(getattr(engine._kernel_plain, "_cache", None), "_cache_path", None)
    if folder is None:
        pytest.skip("JIT disabled")
    stamp = Path(folder) / STAMP_NAME
    if not stamp.exists():
        pytest.skip("cache directory not writable")
    assert stamp.read_text().strip() == source_digest()
