"""Output targets (issue 29, item 1): an output flag never destroys what its path names.

A symlink is written through (the file it points to is replaced whole, the link stays); a
device, FIFO or folder is refused with one line and left as it was (as root, a rename over
``/dev/null`` would replace the device node with a regular file); an existing file keeps its
permission bits. Each case through the library (``atomic_output``) and one through the CLI.
"""

from __future__ import annotations

import os
import stat

import pytest

from archsim.cli import main
from archsim.outputs import atomic_output, write_text_atomic
from archsim.workloads.errors import ConfigError


def test_symlink_is_written_through(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_text_atomic(link, "new", "--out")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]


def test_symlink_to_a_new_name_creates_the_target(tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "fresh.json")
    write_text_atomic(link, "x", "--out")
    assert link.is_symlink() and (tmp_path / "fresh.json").read_text() == "x"


@pytest.mark.parametrize("make, kind", [
    (lambda p: os.mkfifo(p), "a FIFO"),
    (lambda p: p.mkdir(), "a folder"),
])
def test_special_targets_are_refused_and_left_alone(tmp_path, make, kind):
    target = tmp_path / "out.json"
    make(target)
    before = target.lstat()
    with pytest.raises(ConfigError) as err:
        write_text_atomic(target, "x", "--out")
    assert kind in str(err.value) and "--out" in str(err.value)
    after = target.lstat()
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]     # no temporary left


def test_a_device_is_refused_and_stays_a_device():
    dev = "/dev/null"
    assert stat.S_ISCHR(os.stat(dev).st_mode)
    with pytest.raises(ConfigError) as err:
        with atomic_output(dev, "--out"):
            pytest.fail("the body must not run for a device target")
    assert "is a device" in str(err.value)
    assert stat.S_ISCHR(os.stat(dev).st_mode)


def test_an_existing_file_keeps_its_mode(tmp_path):
    f = tmp_path / "r.json"
    f.write_text("old")
    f.chmod(0o640)
    write_text_atomic(f, "new", "--out")
    assert stat.S_IMODE(f.stat().st_mode) == 0o640 and f.read_text() == "new"


def test_cli_trace_to_a_device_exits_2_with_one_line(capsys):
    rc = main(["trace", "tpu_like", "--model", "resnet18", "--a-format", "int8", "--w-format",
               "int8", "--out", "/dev/null"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "/dev/null" in err[0] and "device" in err[0], err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
