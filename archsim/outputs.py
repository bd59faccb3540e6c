"""Output files written whole or not at all.

Every file a command writes (traces, timelines, plots, exports, reports) goes through
:func:`atomic_output`: to a temporary name in the target folder, renamed over the target
only when complete, so an interrupted or failed run never leaves a partial file behind.
:func:`check_output_path` checks a target before any work starts.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from archsim.workloads.errors import ConfigError, Problem

__all__ = ["atomic_output", "check_output_path", "write_text_atomic", "PLOT_SUFFIXES"]

#: File suffixes matplotlib writes for ``archsim plot`` / ``--plot`` outputs.
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def check_output_path(path: str | Path, flag: str,
                      suffixes: Sequence[str] | None = None) -> Path:
    """Check before any work starts that ``path`` can be written: its folder exists and is
    writable, it is not a folder, and (if ``suffixes``) it has one of them.

    Raises:
        ConfigError: naming ``flag``, the path and what was expected.
    """
    p = Path(path)
    if suffixes is not None and p.suffix.lower() not in suffixes:
        raise ConfigError(Problem(f"cannot tell the file type of {str(path)!r}; expected a "
                                  f"name ending in {', '.join(suffixes)}", flag))
    if p.is_dir():
        raise ConfigError(Problem(f"{str(path)!r} is a folder; expected a file name", flag))
    d = p.resolve().parent
    if not d.is_dir():
        raise ConfigError(Problem(f"cannot write {str(path)!r}: no folder {str(d)!r}", flag))
    if not os.access(d, os.W_OK):
        raise ConfigError(Problem(f"cannot write {str(path)!r}: folder {str(d)!r} is not "
                                  f"writable", flag))
    return p


@contextlib.contextmanager
def atomic_output(path: str | Path, flag: str = "--output") -> Iterator[Path]:
    """Yield a temporary path next to ``path`` (same suffix); on a clean exit rename it to
    ``path``, on any exception (Ctrl-C included) delete it. Readers never see half a file.

    Raises:
        ConfigError: the folder is missing or not writable (names ``flag``).
    """
    p = check_output_path(path, flag)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=f".part{p.suffix}",
                               dir=str(p.resolve().parent))
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)       # mkstemp makes 0600; give the usual file mode
    try:
        yield Path(tmp)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str | Path, text: str, flag: str = "--output") -> None:
    """Write ``text`` to ``path`` through :func:`atomic_output`."""
    with atomic_output(path, flag) as tmp:
        tmp.write_text(text, encoding="utf-8")
