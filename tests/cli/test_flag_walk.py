"""Every flag is heard (issue 29, item 2): a walk over each subcommand's flags, read from the
parsers themselves (``archsim.cli.COMMANDS``, each module's ``add_arguments``). Each flag is
given, on one cheap design/model where it may not apply, and must either change the result
(the JSON result without its provenance, or the exit code) or be named by a ``warning:`` /
error line on stderr. Values: every non-default choice; ``store_true`` flags alone; other
flags from :data:`VALUES` (a flag missing there fails the walk, so a new flag needs a probe).

The gemm walk is fast; the run and serve walks are marked slow. Commands not walked yet are
listed in :data:`NOT_WALKED` (the walk over them is issue 29's remaining work)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from archsim.cli import COMMANDS
from tests.cli.test_bad_inputs import SPEC, bad, cli

#: Base command line per walked command (cheap; ``--json`` so results compare as data).
BASES: dict[str, list[str]] = {
    "gemm": ["tpu_like", "--m", "64", "--n", "64", "--k", "64", "--a-format", "int8",
             "--w-format", "int8", "--json"],
    "run": ["tpu_like", "--model", "resnet18", "--a-format", "int8", "--w-format", "int8",
            "--json"],
    "serve": ["gpu/h100", "--model", "gpt2-small", "--rate", "2", "--duration", "5",
              "--prompt", "64", "--output", "8", "--quiet", "--json"],
}
#: Commands whose flags are not walked yet (each still has its own bad-input tests).
NOT_WALKED = {"map", "validate", "validation", "sweep", "results", "trace", "plan",
              "calibrate", "cosearch", "plot", "report", "rerun", "compare", "list"}
#: Flags whose only effect is the output's form, already given by the base (``--json``).
FORM = {"--json"}
#: Probe values of flags that take a free-form value (``{tmp}``: the test's folder).
VALUES: dict[str, dict[str, list[str]]] = {
    "gemm": {"--m": ["128"], "--n": ["128"], "--k": ["128"], "--batch": ["2"],
             "--set": ["units[0].rows=64"], "--a-format": ["bf16"], "--w-format": ["bf16"],
             "--refine": ["2"], "--sparsity": ["2:4"], "--constraints": ["{tmp}/c.yaml"]},
}


def _flags(cmd: str) -> list[argparse.Action]:
    p = argparse.ArgumentParser()
    COMMANDS[cmd].add_arguments(p)
    return [a for a in p._actions if a.option_strings and a.dest != "help"]


def _long(a: argparse.Action) -> str:
    return next(o for o in a.option_strings if o.startswith("--"))


def probes(cmd: str, tmp: Path) -> Iterator[tuple[str, list[str]]]:
    """(flag, argv) for every flag of ``cmd`` and every value it is tried with."""
    for a in _flags(cmd):
        flag = _long(a)
        if flag in FORM:
            continue
        if a.nargs == 0:
            yield flag, [flag]
        elif a.choices:
            for c in a.choices:
                if c != a.default:
                    yield flag, [flag, str(c)]
        else:
            vals = VALUES.get(cmd, {}).get(flag)
            assert vals is not None, f"archsim {cmd} {flag}: no probe value in VALUES"
            for v in vals:
                yield flag, [flag, v.format(tmp=tmp)]


def _result(out: str) -> object:
    try:
        d = json.loads(out)
    except json.JSONDecodeError:
        return out
    if isinstance(d, dict):
        for key in ("provenance", "input_hash"):
            d.pop(key, None)
        if isinstance(d.get("extra"), dict):
            d["extra"].pop("provenance", None)
    return d


def unheard(capsys, cmd: str, tmp: Path) -> list[str]:
    """The probes of ``cmd`` that changed nothing and were not named on stderr."""
    (tmp / "c.yaml").write_text("rules:\n  - {ops: '*', dataflow: [os]}\n")
    code0, out0, _ = cli(capsys, cmd, *BASES[cmd])
    assert code0 == 0
    base = _result(out0)
    silent = []
    for flag, argv in probes(cmd, tmp):
        code, out, err = cli(capsys, cmd, *BASES[cmd], *argv)
        named = any(flag in ln for ln in err.splitlines() if ln.strip())
        if code == code0 and _result(out) == base and not named:
            silent.append(" ".join(argv))
    return silent


def test_every_command_is_walked_or_listed():
    assert set(BASES) | NOT_WALKED == set(COMMANDS)
    assert not set(BASES) & NOT_WALKED


def test_gemm_flags_are_heard(capsys, tmp_path):
    assert unheard(capsys, "gemm", tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("cmd", ["run", "serve"])
def test_flags_are_heard(capsys, tmp_path, cmd):
    assert unheard(capsys, cmd, tmp_path) == []


def test_objective_without_a_choice_is_named(capsys):
    code, out, err = cli(capsys, "gemm", *BASES["gemm"], "--objective", "energy")
    assert code == 0
    assert "warning: --objective energy changes nothing on tpu_like" in err
    code, _, err = cli(capsys, "gemm", *BASES["gemm"], "--objective", "energy", "--mapping",
                       "search")
    assert code == 0 and "--objective" not in err


@pytest.mark.parametrize("design, fmt, runs_as", [("gpu/h100", "int4", "int8"),
                                                  ("gpu/a100", "fp8_e4m3", "fp16")])
def test_format_without_a_tensor_core_path_is_named(capsys, design, fmt, runs_as):
    """Hopper lists no int4 tensor-core rate (configs/gpu/h100.yaml), Ampere no fp8: the
    MMAs run in a wider format, and that is said; a format the design has is quiet."""
    gemm = ["gemm", design, "--m", "64", "--n", "64", "--k", "64"]
    code, _, err = cli(capsys, *gemm, "--a-format", fmt, "--w-format", fmt)
    assert code == 0
    assert (f"warning: --a-format {fmt} --w-format {fmt}: {design[4:]}'s gpu has no {fmt} x "
            f"{fmt} tensor-core path") in err and f"the MMAs run as {runs_as}" in err
    for a, w in (("int8", "int8"), ("fp16", "int4"), ("bf16", "bf16")):
        code, _, err = cli(capsys, *gemm, "--a-format", a, "--w-format", w)
        assert code == 0 and "tensor-core path" not in err, (a, w, err)


def test_sweep_scheduler_without_dask_is_an_error(capsys, tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    db = tmp_path / "r.sqlite"
    bad(capsys, "--scheduler tcp://127.0.0.1:8786 applies only to --backend dask", "sweep",
        str(spec), "--db", str(db), "--scheduler", "tcp://127.0.0.1:8786", "-q")
