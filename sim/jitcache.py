"""Keep Numba's on-disk kernel cache true to the source across files.

Why: Numba keys a cached kernel on its *own* file's stamp (mtime and size) only, but a
cached kernel embeds the machine code of every jitted callee it inlines or links from
other files, and the module-level constants it reads are frozen into it. After an edit of
``sim/dram_kernel.py`` alone, ``sim/engine.py``'s cached ``_kernel`` would still run the old
controller (sim/STATUS.md: a stale decision writing past a shrunk array, a heap abort in a
later test). An installed package is not at risk (an upgrade rewrites every file); a
checkout that edits one kernel file is.

How: every module that defines cached kernels calls :func:`guard` with one of its
dispatchers when imported, before any kernel runs. ``guard`` hashes the sources of every
file whose code or constants reach a compiled kernel (:data:`KERNEL_SOURCES`) and keeps the
digest in a stamp file next to the cached entries (the directory Numba's locator chose:
``__pycache__`` beside the source, or a mirror under ``NUMBA_CACHE_DIR``). When the digest
differs, the directory's Numba entries (``*.nbi`` index, ``*.nbc`` code) are deleted, so
each kernel compiles once more from the current sources (the "compiling" note says so) —
never runs stale. The check costs well under a millisecond per import; a directory that
cannot be written is left to Numba (it then caches nowhere or in its user-wide directory,
which the same stamp guards).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

__all__ = ["KERNEL_SOURCES", "STAMP_NAME", "guard", "source_digest"]

#: Files, relative to the package root (the folder holding ``sim/``), whose source reaches
#: a cached kernel: the kernels themselves and the modules whose functions they inline or
#: whose constants they freeze (command ids, intrinsics).
KERNEL_SOURCES = ("sim/dram_kernel.py", "sim/dram_presets.py", "sim/engine.py",
                  "sim/engine_bucket.py", "sim/intrinsics.py", "sim/taskgraph.py",
                  "sim/jitcache.py", "arch/pim/kernel.py", "mapper/nest_kernel.py")
#: The stamp file's name inside a cache directory.
STAMP_NAME = "archsim-kernels.sha1"

_ROOT = Path(__file__).resolve().parent.parent
_checked: set[Path] = set()
_digest: str | None = None


def source_digest(root: Path = _ROOT) -> str:
    """SHA-1 over :data:`KERNEL_SOURCES` (name and bytes of each; a missing file counts
    as empty), hex."""
    h = hashlib.sha1()
    for rel in KERNEL_SOURCES:
        h.update(rel.encode())
        try:
            h.update((root / rel).read_bytes())
        except OSError:
            h.update(b"\0missing")
    return h.hexdigest()


def _cache_dir(dispatcher: Any) -> Path | None:
    """The directory Numba caches ``dispatcher``'s entries in (None without a cache or
    without the JIT)."""
    cache = getattr(dispatcher, "_cache", None)
    path = getattr(cache, "_cache_path", None)
    return Path(path) if path else None


def guard(dispatcher: Any, *, digest: str | None = None) -> bool:
    """Drop the Numba entries cached beside ``dispatcher`` if any of :data:`KERNEL_SOURCES`
    changed since they were written; returns True when entries were dropped. Once per
    directory per process; ``digest`` (tests) overrides :func:`source_digest`."""
    global _digest
    folder = _cache_dir(dispatcher)
    if folder is None or (digest is None and folder in _checked):
        return False
    _checked.add(folder)
    if digest is None:
        if _digest is None:
            _digest = source_digest()
        digest = _digest
    stamp = folder / STAMP_NAME
    try:
        if stamp.read_text().strip() == digest:
            return False
    except OSError:
        pass
    dropped = False
    try:
        for entry in list(folder.glob("*.nbi")) + list(folder.glob("*.nbc")):
            entry.unlink(missing_ok=True)
            dropped = True
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"{STAMP_NAME}.{os.getpid()}.tmp"
        tmp.write_text(digest + "\n")
        tmp.replace(stamp)
    except OSError:
        return dropped
    return dropped
