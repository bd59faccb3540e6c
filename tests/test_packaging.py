"""One import root (issue 25): ``pip install .`` puts ``archsim`` and nothing else at the top
of site-packages, and the installed package works from a folder whose own files are named
like archsim's layers (``arch.py``, ``sim.py``, ...), which would shadow top-level layers.

The first test reads ``pyproject.toml``: its explicit package list (package-dir maps
``archsim.arch`` -> ``arch/`` and so on) must name every package folder, or a new
subpackage would silently be left out of the wheel. The second builds and installs the
project into a temporary folder (``pip install --target``; it needs the package index for
the build backend, so it is marked slow and runs in ``.ci/run``).
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
LAYERS = ("arch", "dataflow", "energy", "mapper", "sim", "workloads")


def test_package_list_names_every_package_folder():
    pkg_dir = CONFIG["package-dir"]
    assert pkg_dir == {"archsim": "archsim", "archsim.configs": "configs",
                       **{f"archsim.{layer}": layer for layer in LAYERS}}
    found = {"archsim.configs"}
    for pkg, folder in pkg_dir.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join([pkg, *rel]))
    assert sorted(CONFIG["packages"]) == sorted(found)
    assert all(p == "archsim" or p.startswith("archsim.") for p in CONFIG["packages"])


def _site_dirs() -> list[str]:
    """The running interpreter's package folders (a venv's and, with system site packages,
    the system's) — where numpy, numba, networkx ... are — without processing their .pth
    files (the repository's editable install must not be found)."""
    dirs = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return dirs or [sysconfig.get_paths()["purelib"]]


@pytest.mark.slow
def test_installed_tree_has_one_root_and_ignores_shadowing_files(tmp_path):
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
                        "--target", str(target), str(ROOT)], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    top = {p.name for p in target.iterdir() if p.name != "bin"}
    assert {n for n in top if not n.endswith(".dist-info")} == {"archsim"}, top
    work = tmp_path / "user_scripts"
    work.mkdir()
    for name in (*LAYERS, "workloads"):
        (work / f"{name}.py").write_text(f"raise ImportError('user file {name}.py was imported')\n")
    # No site processing (the repository's own editable install must not be found), the
    # installed tree first, then the interpreter's site-packages for numpy, numba, ...
    code = (
        "import sys\n"
        f"sys.path[1:1] = [{str(target)!r}, *{_site_dirs()!r}]\n"
        "import archsim, archsim.arch, archsim.sim, archsim.energy, archsim.mapper\n"
        f"assert archsim.arch.__file__.startswith({str(target)!r}), archsim.arch.__file__\n"
        "from archsim import load, workload, evaluate\n"
        "r = evaluate(load('tpu_like'), workload('gpt2-small', phase='prefill', seq=32))\n"
        "assert r.latency_s > 0 and r.energy_j > 0\n"
        "print('ok', sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{set(LAYERS)!r}))\n")
    r = subprocess.run([sys.executable, "-S", "-c", code], cwd=work, capture_output=True,
                       text=True, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "ok []", r.stdout


@pytest.mark.slow
def test_pip_install_in_a_fresh_venv(tmp_path):
    """The issue's own words: a fresh venv (system packages visible for numpy, numba, ...),
    ``pip install .``, then ``import archsim`` from a folder of look-alike files; the venv's
    site-packages gains ``archsim`` and its dist-info, nothing else."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    before = set(p.name for p in site.iterdir())
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
                        str(ROOT)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    added = {n for n in set(p.name for p in site.iterdir()) - before
             if not n.endswith(".dist-info") and n != "__pycache__"}
    assert added == {"archsim"}, added
    work = tmp_path / "scripts"
    work.mkdir()
    for name in LAYERS:
        (work / f"{name}.py").write_text(f"raise ImportError('user file {name}.py')\n")
    r = subprocess.run([str(py), "-c", "import archsim, sys; import archsim.arch.gpu; "
                        "print(archsim.arch.gpu.__file__); "
                        "print(archsim.load('gpu/h100').name)"],
                       cwd=work, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    path, name = r.stdout.split()
    assert path.startswith(str(site)) and name == "h100", r.stdout
