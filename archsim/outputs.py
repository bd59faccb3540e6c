"""Output files written whole or not at all.

Every file a command writes (traces, timelines, plots, exports, reports) goes through
:func:`atomic_output`: to a temporary name in the target's folder, renamed over the target
only when complete, so an interrupted or failed run never leaves a partial file behind.
:func:`check_output_path` checks a target before any work starts.

What a target may be: a new name, or an existing regular file (replaced whole, keeping its
permission bits). A symbolic link is written through: the file it points to is replaced, the
link stays. Anything else that already exists under the name — a device such as
``/dev/full``, a FIFO, a socket, a folder — is refused with one line, never replaced (the
rename would turn a device node into a regular file when run as root).
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
    if p.exists() and not p.is_file():
        kind = ("a device" if p.is_block_device() or p.is_char_device() else
                "a FIFO" if p.is_fifo() else "a socket" if p.is_socket() else "not a file")
        raise ConfigError(Problem(f"{str(path)!r} is {kind}; expected a new file name or a "
                                  f"regular file to replace", flag))
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
    target = p.resolve()                # through symlinks: replace the file, keep the link
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=f".part{target.suffix}",
                               dir=str(target.parent))
    os.close(fd)
    if target.is_file():                # an existing file keeps its permission bits
        os.chmod(tmp, target.stat().st_mode & 0o7777)
    else:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)   # mkstemp makes 0600; give the usual file mode
    try:
        yield Path(tmp)
        if target.exists() and not target.is_file():   # became a device/FIFO meanwhile
            raise ConfigError(Problem(f"{str(path)!r} is no longer a regular file; not "
                                      f"replaced", flag))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str | Path, text: str, flag: str = "--output") -> None:
    """Write ``text`` to ``path`` through :func:`atomic_output`."""
    with atomic_output(path, flag) as tmp:
        tmp.write_text(text, encoding="utf-8")
