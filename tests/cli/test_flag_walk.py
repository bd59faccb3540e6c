"""Every flag is heard (issue 29, item 2): a walk over each subcommand's flags, read from the
parsers themselves (``archsim.cli.COMMANDS``, each module's ``add_arguments``). Each flag is
given, on one cheap design/model where it may not apply, and must either change the result
(the JSON result without its provenance, or the exit code) or be named by a ``warning:`` /
error line on stderr. Values: every non-default choice; ``store_true`` flags alone; other
flags from :data:`VALUES` (a flag missing there fails the walk, so a new flag needs a probe).

Every subcommand is walked (``plot`` per kind: ``plot pareto`` ...). A base may name
``{tmp}`` (the test's folder, holding a sweep store ``store.sqlite``, a sweep spec, a small
co-search spec and a rerunnable result) and ``{run}`` (a fresh folder per call, for the files
the base itself writes: those files are part of the result). The walks of :data:`SLOW` (a
mapping, cycle simulation, co-search, validation or plot per probe: > 1 s) are marked slow."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from archsim.cli import COMMANDS
from tests.cli.test_bad_inputs import ROOT, SPEC, bad, cli

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
BASES.update({
    "validate": ["tpu_like"],
    "validation": ["--family", "timeloop"],
    "sweep": ["{tmp}/s.yaml", "--db", "{run}/r.sqlite", "-q"],
    "results": ["{tmp}/store.sqlite"],
    "report": ["{tmp}/store.sqlite", "-o", "{run}/r.html"],
    "calibrate": ["tests/data/silicon/h100_calibration.jsonl", "--config", "gpu/h100", "--out",
                  "{run}/c.yaml"],
    "rerun": ["{tmp}/result.json"],
    "list": ["models"],
    "plot pareto": ["pareto", "{tmp}/store.sqlite", "-o", "{run}/p.svg"],
    "plot heatmap": ["heatmap", "{tmp}/store.sqlite", "--x", "units[0].rows", "--y",
                     "units[0].cols", "-o", "{run}/h.svg"],
    "plot breakdown": ["breakdown", "tpu_like", "--model", "resnet18", "--a-format", "int8",
                       "--w-format", "int8", "-o", "{run}/b.svg"],
    "plot roofline": ["roofline", "tpu_like", "--model", "resnet18", "--a-format", "int8",
                      "--w-format", "int8", "-o", "{run}/r.svg"],
    # slow: each mapping, cycle simulation, co-search or plot costs seconds
    "map": ["tpu_like", "--model", "gpt2-small", "--phase", "decode", "--json"],
    "trace": ["tpu_like", "--model", "resnet18", "--a-format", "int8", "--w-format", "int8",
              "--op", "conv1", "--out", "{run}/t.json", "-q"],
    "cosearch": ["{tmp}/cosearch.yaml", "--db", "{run}/c.sqlite", "--no-progress"],
})
FAST = ["gemm", "plan", "compare", "validate", "sweep", "results", "calibrate", "rerun", "list"]
SLOW = ["run", "serve", "map", "trace", "cosearch", "validation", "report", "plot pareto",
        "plot heatmap", "plot breakdown", "plot roofline"]
#: Probes of a fast walk that cost seconds (a cycle-level simulation, a plot): walked in the
#: slow test ``test_slow_probes_are_heard``.
SLOW_PROBES = {"sweep": {"--fidelity cycle", "--plot {tmp}/s.svg"}}
#: Commands not walked: ``provision`` (each probe is a search of serving simulations; its
#: bad inputs are tests/serve/test_provision.py's).
NOT_WALKED = {"provision"}
#: Flags whose only effect is the output's form, already given by the base.
FORM = {"--json", "--quiet", "--csv", "--no-progress"}
#: Probes that spell out what the command does by default on the base (not inert flags).
SAME_AS_DEFAULT = {"run": {"--phase inference", "--objective latency",
                           "--attention-kernel sdpa"},
                   "plan": {"--attention-kernel sdpa"},
                   "compare": {"--phase inference"},
                   # configs/gpu/h100.yaml runtime: ideal; h100 has paged_attention constants
                   "serve": {"--runtime ideal", "--attention-kernel paged"},
                   "map": {"--phase decode", "--objective latency", "--mapping search",
                           "--attention-kernel sdpa"},
                   "trace": {"--phase inference"},
                   "sweep": {"--fidelity analytical",   # SPEC's fidelity
                             "--no-json"}}              # the hidden spelling of the default
#: Probes that only place the work (which processes evaluate the points): the results are the
#: same by design (tests/explore check that a dask sweep stores what a local one does).
PLACEMENT = {"sweep": {"--backend dask", "--workers 2"},
             "cosearch": {"--backend dask", "--workers 2"}}
#: Probe values of flags that take a free-form value (``{tmp}``: the test's folder).
VALUES: dict[str, dict[str, list[str]]] = {
    "validate": {"--set": ["units[0].sm_count=66"]},
    "validation": {"--family": ["energy"], "--out": ["{tmp}/v.md"], "--plot": ["{tmp}/v.svg"]},
    "sweep": {"--db": ["{tmp}/other.sqlite"], "--scheduler": ["tcp://127.0.0.1:8786"],
              "--workers": ["2"], "--plot": ["{tmp}/s.svg"]},
    "results": {"--where": ["units_0_rows > 8"], "--pareto": ["latency_s,area_mm2"],
                "--output": ["{tmp}/r.csv"]},
    "report": {"--output": ["{tmp}/r2.html"], "--objectives": ["latency_s,area_mm2"],
               "--heatmap": ["units[0].cols,units[0].rows"], "--title": ["T"]},
    "calibrate": {"--config": ["gpu/a100"], "--out": ["{tmp}/c2.yaml"]},
    "plot pareto": {"--objectives": ["latency_s,area_mm2"], "--output": ["{tmp}/p2.svg"]},
    "plot heatmap": {"--x": ["units[0].cols"], "--y": ["units[0].rows"],
                     "--metric": ["energy_j"], "--output": ["{tmp}/h2.svg"]},
    "plot breakdown": {"--model": ["resnet50"], "--phase": ["train"], "--batch": ["2"],
                       "--seq": ["512"], "--context": ["64"], "--a-format": ["bf16"],
                       "--w-format": ["bf16"], "--set": ["units[0].rows=64"],
                       "--top": ["3"], "--output": ["{tmp}/b2.svg"]},
    "plot roofline": {"--model": ["resnet50"], "--phase": ["train"], "--batch": ["2"],
                      "--seq": ["512"], "--context": ["64"], "--a-format": ["bf16"],
                      "--w-format": ["bf16"], "--set": ["units[0].rows=64"],
                      "--output": ["{tmp}/r2.svg"]},
    "trace": {"--model": ["resnet50"], "--batch": ["2"], "--seq": ["512"], "--context": ["64"],
              "--tp": ["2"], "--a-format": ["bf16"], "--w-format": ["bf16"],
              "--set": ["units[0].rows=64"], "--op": ["fc"], "--out": ["{tmp}/t2.json"],
              "--max-events": ["3"]},
    "cosearch": {"--db": ["{tmp}/c2.sqlite"], "--out": ["{tmp}/co"],
                 "--scheduler": ["tcp://127.0.0.1:8786"], "--workers": ["2"]},
    "gemm": {"--m": ["128"], "--n": ["128"], "--k": ["128"], "--batch": ["2"],
             "--set": ["units[0].rows=64"], "--a-format": ["bf16"], "--w-format": ["bf16"],
             "--refine": ["2"], "--sparsity": ["2:4"], "--constraints": ["{tmp}/c.yaml"],
             "--weight-sparsity": ["0.5"], "--w-group-size": ["128"]},
    "plan": {"--model": ["gpt2-medium"], "--devices": ["4"], "--batch": ["4"], "--seq": ["256"],
             "--context": ["64"], "--top": ["1"], "--a-format": ["fp8_e4m3"],
             "--w-format": ["fp8_e4m3"], "--kv-format": ["fp8_e4m3"],
             "--power-caps": ["100%,70%"], "--price-per-gpu-hour": ["2.5"], "--slo-ms": ["5"],
             "--offload": ["optimizer"], "--offload-gbps": ["5"], "--overlap": ["tokensplit"],
             "--weight-sparsity": ["0.5"], "--w-group-size": ["128"],
             "--doc-lengths": ["lognormal:512:1.0"], "--packing": ["balanced"],
             "--cp-sharding": ["per-document"], "--doc-seed": ["1"],
             "--prefix-hit-rate": ["0.5"], "--topk-blocks": ["4"], "--kv-offload-gb": ["8"],
             "--block-size": ["8"]},
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
            "--moe-routing": ["balanced"], "--offload": ["optimizer"], "--offload-gbps": ["5"],
            "--overlap": ["tokensplit"], "--weight-sparsity": ["0.5"], "--w-group-size": ["128"],
            "--doc-lengths": ["lognormal:512:1.0"], "--packing": ["balanced"],
            "--cp-sharding": ["per-document"], "--doc-seed": ["1"],
            "--prefix-hit-rate": ["0.5"], "--topk-blocks": ["4"], "--kv-offload-gb": ["8"],
            "--block-size": ["8"]},
    "serve": {"--model": ["gpt2-medium"], "--set": ["units[0].sm_count=66"], "--tp": ["2"],
              "--overlap": ["tokensplit"], "--prefix-hit-rate": ["0.5"], "--topk-blocks": ["4"],
              "--kv-offload-gb": ["8"],
              "--replicas": ["2"], "--decode-replicas": ["1"], "--decode-tp": ["2"],
              "--kv-link": ["pcie5"], "--a-format": ["fp8_e4m3"], "--w-format": ["fp8_e4m3"],
              "--kv-format": ["fp8_e4m3"], "--memory-fraction": ["0.5"], "--rate": ["4"],
              "--duration": ["10"], "--trace": ["{tmp}/t.csv"], "--prompt": ["128"],
              "--output": ["16"], "--cv": ["2"], "--seed": ["1"], "--max-requests": ["3"],
              "--concurrency": ["2"], "--isl": ["64"], "--osl": ["8"], "--requests": ["4"],
              "--chunk": ["64"], "--max-num-seqs": ["1"], "--max-batched-tokens": ["64"],
              "--block-size": ["32"], "--iteration-overhead-ms": ["1"],
              "--kv-manager": ["uniform"], "--moe-routing": ["balanced"],
              "--engine": ["trtllm"],
              "--slo": ["ttft=1ms"], "--attainment": ["0.5"], "--constraints": ["{tmp}/c.yaml"],
              "--decode-constraints": ["{tmp}/c.yaml"], "--timeline": ["{tmp}/tl.json"],
              "--plot": ["{tmp}/p.png"], "--pp": ["2"], "--ep": ["2"], "--cp": ["2"],
              "--plan": ["tp2pp2"], "--decode-pp": ["2"], "--decode-ep": ["2"],
              "--decode-plan": ["tp2"], "--decode-design": ["gpu/a100"],
              "--weight-sparsity": ["0.5"], "--w-group-size": ["128"]},
}


VALUES["map"] = {**VALUES["run"], "--model": ["gpt2-medium"], "--a-format": ["int8"],
                 "--w-format": ["int8"]}


def _flags(cmd: str) -> list[argparse.Action]:
    """The optional flags of ``cmd`` (``plot KIND``: of that kind's sub-parser)."""
    top, _, kind = cmd.partition(" ")
    p = argparse.ArgumentParser()
    COMMANDS[top].add_arguments(p)
    if kind:
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        p = sub.choices[kind]
    return [a for a in p._actions if a.option_strings and a.dest != "help"]


def _long(a: argparse.Action) -> str:
    return next(o for o in a.option_strings if o.startswith("--"))


def probes(cmd: str, tmp: Path) -> Iterator[tuple[str, list[str]]]:
    """(flag, argv) for every flag of ``cmd`` and every value it is tried with."""
    for a in _flags(cmd):
        flag = _long(a)
        if flag in FORM:
            continue
        skip = SAME_AS_DEFAULT.get(cmd, set()) | PLACEMENT.get(cmd, set())
        if a.nargs == 0:
            argvs = [[flag]]
        elif a.choices:
            argvs = [[flag, str(c)] for c in a.choices if c != a.default]
        else:
            vals = VALUES.get(cmd, {}).get(flag)
            assert vals is not None, f"archsim {cmd} {flag}: no probe value in VALUES"
            argvs = [[flag, v.format(tmp=tmp)] for v in vals]
        for argv in argvs:
            if " ".join(argv) not in skip:
                yield flag, argv


def _result(out: str, run: Path | None = None) -> object:
    """The result without provenance, run times or the per-call folder's name, plus what the
    call wrote into its own folder ``run`` (store rows; other files' text)."""
    if run is not None:
        out = out.replace(str(run), "{run}")
    out = re.sub(r"in [0-9.]+ s \([0-9.]+ /s\)", "", out)
    try:
        d = json.loads(out)
    except json.JSONDecodeError:
        d = out
    if isinstance(d, dict):
        for key in ("provenance", "input_hash"):
            d.pop(key, None)
        if isinstance(d.get("extra"), dict):
            d["extra"].pop("provenance", None)
    files = {}
    for f in sorted(run.rglob("*")) if run is not None else []:
        if f.suffix == ".sqlite":
            with sqlite3.connect(f) as db:
                files[f.name] = db.execute(
                    "SELECT hash, status, error, latency_s, energy_j, area_mm2, "
                    "result_json IS NULL FROM results ORDER BY hash").fetchall()
        elif f.suffix == ".svg":                 # without the date matplotlib writes
            files[f.name] = re.sub(r"<dc:date>.*?</dc:date>", "", f.read_text())
        elif f.is_file():
            files[f.name] = f.read_bytes()
    return (d, files) if files else d


def _inputs(capsys, tmp: Path) -> None:
    """The files the bases and probes read: constraints, a trace, a sweep spec and store, a
    small co-search, a rerunnable result."""
    (tmp / "c.yaml").write_text("rules:\n  - {ops: '*', dataflow: [os]}\n")
    (tmp / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,64,8\n0.5,64,8\n")
    (tmp / "s.yaml").write_text(SPEC)
    assert cli(capsys, "sweep", str(tmp / "s.yaml"), "--db", str(tmp / "store.sqlite"),
               "-q")[0] == 0
    for f in ("cosearch.yaml", "hetero.yaml", "accuracy.py"):
        shutil.copy(ROOT / "examples" / "nasaic" / f, tmp / f)
    spec = tmp / "cosearch.yaml"
    # one value per numeric axis and network choice: 2 dataflows x 1 network per task
    spec.write_text(re.sub(r"\[([0-9]+)(, [0-9]+)+\]", r"[\1]", spec.read_text()))
    code, out, _ = cli(capsys, "gemm", *BASES["gemm"])
    (tmp / "result.json").write_text(out)


def unheard(capsys, cmd: str, tmp: Path, slow: bool | None = None) -> list[str]:
    """The probes of ``cmd`` that changed nothing, wrote no file and were not named on
    stderr (``slow``: only those in :data:`SLOW_PROBES` (True) or not (False); None: all)."""
    _inputs(capsys, tmp)
    top = cmd.split()[0]
    calls = iter(range(10**6))

    def call(*argv: str) -> tuple[int, object, str]:
        run = tmp / f"run{next(calls)}"
        run.mkdir()
        base = [b.format(tmp=tmp, run=run) for b in BASES[cmd]]
        code, out, err = cli(capsys, top, *base, *argv)
        return code, _result(out, run), err

    code0, base, err0 = call()
    assert code0 == 0, err0
    silent = []
    slow_ones = {p.format(tmp=tmp) for p in SLOW_PROBES.get(cmd, ())}
    for flag, argv in probes(cmd, tmp):
        if slow is not None and (" ".join(argv) in slow_ones) != slow:
            continue
        files = {f for f in tmp.iterdir() if not f.name.startswith("run")}
        code, result, err = call(*argv)
        named = any(flag in ln for ln in err.splitlines() if ln.strip())
        wrote = {f for f in tmp.iterdir() if not f.name.startswith("run")} != files
        if code == code0 and result == base and not named and not wrote:
            silent.append(" ".join(argv))
    return silent


def test_every_command_is_walked():
    assert {c.split()[0] for c in BASES} | NOT_WALKED == set(COMMANDS)
    assert set(FAST) | set(SLOW) == set(BASES) and not set(FAST) & set(SLOW)
    plot = argparse.ArgumentParser()
    COMMANDS["plot"].add_arguments(plot)
    kinds = next(a for a in plot._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {f"plot {k}" for k in kinds} == {c for c in BASES if c.startswith("plot ")}


@pytest.mark.parametrize("cmd", FAST)
def test_fast_flags_are_heard(capsys, tmp_path, cmd):
    silent = unheard(capsys, cmd, tmp_path, slow=False)
    assert silent == [], "; ".join(silent)


@pytest.mark.slow
@pytest.mark.parametrize("cmd", sorted(SLOW_PROBES))
def test_slow_probes_are_heard(capsys, tmp_path, cmd):
    silent = unheard(capsys, cmd, tmp_path, slow=True)
    assert silent == [], "; ".join(silent)


@pytest.mark.slow
@pytest.mark.parametrize("cmd", SLOW)
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


@pytest.mark.parametrize("cmd, args", [
    ("gemm", ["tpu_like", "--m", "64", "--n", "64", "--k", "64"]),
    ("serve", ["fpga/sat_vcu1525", "--model", "gpt2-small", "--rate", "2", "--duration", "1"])])
def test_runtime_on_a_design_without_runtime_protocols(capsys, cmd, args):
    """--runtime is the override units[0].runtime=X; a unit kind without a runtime key is
    told which designs have runtime protocols, naming the flag (not --set)."""
    line = bad(capsys, "config error: --runtime: this unit has no runtime protocol", cmd,
               *args, "--runtime", "eager")
    assert "tensor-core GPU designs" in line and "configs/gpu/" in line and "--set:" not in line


def test_force_on_matching_rows_is_named(capsys, tmp_path):
    """--force accepts another device's rows; on rows of the config's own device it changes
    nothing, and says so."""
    code, out, err = cli(capsys, "calibrate", "tests/data/silicon/h100_calibration.jsonl",
                         "--config", "gpu/h100", "--out", str(tmp_path / "c.yaml"), "--force")
    assert code == 0 and "warning: --force changes nothing: every row of" in err
    assert "was measured on the design 'h100'" in err


def test_trace_names_a_sequence_length_on_a_cnn(capsys, tmp_path):
    code, _, err = cli(capsys, "trace", "tpu_like", "--model", "resnet18", "--op", "fc",
                       "--out", str(tmp_path / "t.json"), "-q", "--seq", "512")
    assert code == 0
    assert "warning: --seq 512 does not apply to resnet18 (it has no token sequence)" in err


@pytest.mark.parametrize("n", ["0", "-1"])
def test_cosearch_workers_below_one(capsys, n):
    """Found by the walk's neighbours: --workers 0 ended in the process pool's ValueError
    traceback after loading the spec."""
    bad(capsys, f"argument --workers: expected an integer >= 1, got {n}", "cosearch",
        "spec.yaml", "--db", "c.sqlite", "--workers", n)
