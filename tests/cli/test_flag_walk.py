"""Every flag is heard (issue 29, item 2): a walk over each subcommand's flags, read from the
parsers themselves (``archsim.cli.COMMANDS``, each module's ``add_arguments``). Each flag is
given, on one cheap design/model where it may not apply, and must either change the result
(the JSON result without its provenance, or the exit code) or be named by a ``warning:`` /
error line on stderr. Values: every non-default choice; ``store_true`` flags alone; other
flags from :data:`VALUES` (a flag missing there fails the walk, so a new flag needs a probe).

The gemm, plan and compare walks are fast; the run and serve walks are marked slow. Commands not walked yet are
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
    "plan": ["gpu/h100", "--model", "gpt2-small", "--devices", "2", "--json"],
    "compare": ["tpu_like", "gpu/h100", "--model", "resnet18", "--csv"],
    # loaded enough (40 requests in 2 s) that batching and arrival settings matter
    "serve": ["gpu/h100", "--model", "gpt2-small", "--rate", "20", "--duration", "2",
              "--prompt", "64", "--output", "8", "--quiet", "--json"],
}
#: Commands whose flags are not walked yet (each still has its own bad-input tests).
NOT_WALKED = {"map", "validate", "validation", "sweep", "results", "trace", "calibrate",
              "cosearch", "plot", "report", "rerun", "list", "provision"}
#: Flags whose only effect is the output's form, already given by the base.
FORM = {"--json", "--quiet", "--csv"}
#: Probes that spell out what the command does by default on the base (not inert flags).
SAME_AS_DEFAULT = {"run": {"--phase inference", "--objective latency"},
                   "compare": {"--phase inference"},
                   "serve": {"--runtime ideal"}}     # configs/gpu/h100.yaml runtime: ideal
#: Probe values of flags that take a free-form value (``{tmp}``: the test's folder).
VALUES: dict[str, dict[str, list[str]]] = {
    "gemm": {"--m": ["128"], "--n": ["128"], "--k": ["128"], "--batch": ["2"],
             "--set": ["units[0].rows=64"], "--a-format": ["bf16"], "--w-format": ["bf16"],
             "--refine": ["2"], "--sparsity": ["2:4"], "--constraints": ["{tmp}/c.yaml"],
             "--weight-sparsity": ["0.5"], "--w-group-size": ["128"]},
    "plan": {"--model": ["gpt2-medium"], "--devices": ["4"], "--batch": ["4"], "--seq": ["256"],
             "--context": ["64"], "--top": ["1"], "--a-format": ["fp8_e4m3"],
             "--w-format": ["fp8_e4m3"], "--kv-format": ["fp8_e4m3"],
             "--power-caps": ["100%,70%"], "--price-per-gpu-hour": ["2.5"], "--slo-ms": ["5"],
             "--weight-sparsity": ["0.5"], "--w-group-size": ["128"]},
    "compare": {"--model": ["resnet50"], "--batch": ["2"], "--seq": ["512"], "--context": ["64"],
                "--a-format": ["bf16"], "--w-format": ["bf16"]},
    "run": {"--model": ["resnet50"], "--batch": ["2"], "--seq": ["512"], "--context": ["64"],
            "--tp": ["2"], "--max-ops": ["3"], "--set": ["units[0].rows=64"],
            "--mapping": ["search"], "--a-format": ["bf16"], "--w-format": ["bf16"],
            "--refine": ["2"], "--constraints": ["{tmp}/c.yaml"], "--sparsity": ["2:4"],
            "--pp": ["2"], "--dp": ["2"], "--ep": ["2"], "--cp": ["2"], "--microbatches": ["4"],
            "--kv-format": ["fp8_e4m3"], "--interleave": ["2"], "--moe-imbalance": ["1.5"],
            "--timeloop": ["{tmp}/c.yaml"], "--problem": ["{tmp}/c.yaml"],
            "--ert": ["{tmp}/c.yaml"], "--time-budget": ["1"], "--seed": ["1"],
            "--save-mapping": ["{tmp}/m.yaml"], "--power-cap": ["70%"],
            "--zigzag-accelerator": ["{tmp}/c.yaml"], "--zigzag-mapping": ["{tmp}/c.yaml"],
            "--moe-routing": ["balanced"], "--weight-sparsity": ["0.5"], "--w-group-size": ["128"]},
    "serve": {"--model": ["gpt2-medium"], "--set": ["units[0].sm_count=66"], "--tp": ["2"],
              "--replicas": ["2"], "--decode-replicas": ["1"], "--decode-tp": ["2"],
              "--kv-link": ["pcie5"], "--a-format": ["fp8_e4m3"], "--w-format": ["fp8_e4m3"],
              "--kv-format": ["fp8_e4m3"], "--memory-fraction": ["0.5"], "--rate": ["4"],
              "--duration": ["10"], "--trace": ["{tmp}/t.csv"], "--prompt": ["128"],
              "--output": ["16"], "--cv": ["2"], "--seed": ["1"], "--max-requests": ["3"],
              "--concurrency": ["2"], "--isl": ["64"], "--osl": ["8"], "--requests": ["4"],
              "--chunk": ["64"], "--max-num-seqs": ["1"], "--max-batched-tokens": ["64"],
              "--block-size": ["32"], "--iteration-overhead-ms": ["1"],
              "--slo": ["ttft=1ms"], "--attainment": ["0.5"], "--constraints": ["{tmp}/c.yaml"],
              "--decode-constraints": ["{tmp}/c.yaml"], "--timeline": ["{tmp}/tl.json"],
              "--plot": ["{tmp}/p.png"], "--pp": ["2"], "--ep": ["2"], "--cp": ["2"],
              "--plan": ["tp2pp2"], "--decode-pp": ["2"], "--decode-ep": ["2"],
              "--decode-plan": ["tp2"], "--decode-design": ["gpu/a100"],
              "--weight-sparsity": ["0.5"], "--w-group-size": ["128"]},
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
                if c != a.default and f"{flag} {c}" not in SAME_AS_DEFAULT.get(cmd, set()):
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
    """The probes of ``cmd`` that changed nothing, wrote no file and were not named on
    stderr."""
    (tmp / "c.yaml").write_text("rules:\n  - {ops: '*', dataflow: [os]}\n")
    (tmp / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,64,8\n0.5,64,8\n")
    code0, out0, _ = cli(capsys, cmd, *BASES[cmd])
    assert code0 == 0
    base = _result(out0)
    silent = []
    for flag, argv in probes(cmd, tmp):
        files = set(tmp.iterdir())
        code, out, err = cli(capsys, cmd, *BASES[cmd], *argv)
        named = any(flag in ln for ln in err.splitlines() if ln.strip())
        wrote = set(tmp.iterdir()) != files
        if code == code0 and _result(out) == base and not named and not wrote:
            silent.append(" ".join(argv))
    return silent


def test_every_command_is_walked_or_listed():
    assert set(BASES) | NOT_WALKED == set(COMMANDS)
    assert not set(BASES) & NOT_WALKED


@pytest.mark.parametrize("cmd", ["gemm", "plan", "compare"])
def test_fast_flags_are_heard(capsys, tmp_path, cmd):
    silent = unheard(capsys, cmd, tmp_path)
    assert silent == [], "; ".join(silent)


@pytest.mark.slow
@pytest.mark.parametrize("cmd", ["run", "serve"])
def test_flags_are_heard(capsys, tmp_path, cmd):
    silent = unheard(capsys, cmd, tmp_path)
    assert silent == [], "; ".join(silent)


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


SERVE = ["serve", "gpu/h100", "--model", "gpt2-small", "--rate", "2", "--duration", "2",
         "--quiet"]


@pytest.mark.parametrize("extra, says", [
    (("--cv", "2"), "--cv 2 applies only to --arrival gamma"),
    (("--arrival", "gamma"), "--arrival gamma with --cv 1 (the default) has exponential gaps"),
    (("--chunk", "64"), "--chunk 64 is the sarathi token budget; --scheduler vllm"),
    (("--scheduler", "sarathi", "--max-batched-tokens", "64"),
     "--max-batched-tokens 64 is the vllm/orca budget"),
    (("--attainment", "0.5"), "--attainment 0.5 needs an SLO")])
def test_inert_serving_settings_are_named(capsys, extra, says):
    code, _, err = cli(capsys, *SERVE, *extra)
    assert code == 0
    warns = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert len(warns) == 1 and says in warns[0], err


@pytest.mark.parametrize("extra", [("--arrival", "gamma", "--cv", "2"),
                                   ("--scheduler", "sarathi", "--chunk", "64"),
                                   ("--attainment", "0.5", "--slo", "ttft=1s")])
def test_serving_settings_that_apply_are_quiet(capsys, extra):
    code, _, err = cli(capsys, *SERVE, *extra)
    assert code == 0 and "warning" not in err, err


@pytest.mark.parametrize("extra", [("--json",), ()])
def test_max_ops_outside_runs_text_table_is_named(capsys, extra):
    args = ["tpu_like", "--model", "resnet18", "--a-format", "int8", "--w-format", "int8",
            "--max-ops", "3"]
    code, _, err = cli(capsys, "run" if extra else "map", *args, *extra)
    assert code == 0 and "warning: --max-ops 3 sets the rows of run's text table" in err
    code, out, err = cli(capsys, "run", *args)
    assert code == 0 and "--max-ops" not in err
    assert "smaller ops not shown" in out    # the text table is cut at 3 op rows
