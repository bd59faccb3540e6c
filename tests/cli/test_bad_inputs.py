"""Every bad input of issue 20 gets one message naming the file/key/flag, exit 2 (never a
traceback, never a silent wrong result), and no partial output file.

All cases run ``archsim.cli.main`` in-process (argparse errors arrive as SystemExit);
signal tests are in test_kill.py.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest

from archsim.cli import main
from archsim.explore import parse_spec_text, run_sweep
from archsim.outputs import atomic_output
from tests.conftest import ROOT

TPU = str(ROOT / "configs/spatial/tpu_like.yaml")
GEMM = ("--m", "64", "--n", "64", "--k", "64")


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``archsim ARGS``."""
    try:
        code = main(list(args))
    except SystemExit as exc:           # argparse usage errors
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def one_error(err: str) -> str:
    """The single non-warning stderr line (asserting there is exactly one)."""
    lines = [ln for ln in err.splitlines() if ln and not ln.startswith(("warning:", "note:"))]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def bad(capsys, needle: str, *args: str) -> str:
    code, out, err = cli(capsys, *args)
    assert code == 2, (code, out, err)
    line = one_error(err)
    assert needle in line, line
    return line


# ---- config files ---------------------------------------------------------------------------
def test_binary_garbage_config_does_not_stop_validate_of_other_files(capsys, tmp_path):
    junk = tmp_path / "junk.yaml"
    junk.write_bytes(bytes(range(128, 256)) * 3)
    code, out, err = cli(capsys, "validate", str(junk), "tpu_like")
    assert code == 2
    assert f"{junk}:1: not a text file (byte 0x80 at offset 0 is not UTF-8)" in one_error(err)
    assert "ok  tpu_like" in out              # the next file was still validated


def test_deeply_nested_yaml_is_a_problem_not_a_recursion_error(capsys, tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("[" * 5000 + "]" * 5000)
    bad(capsys, f"{deep}:1: invalid YAML: nested more than 100 levels deep", "validate",
        str(deep))


def _tpu_text(**repl: str) -> str:
    text = Path(TPU).read_text()
    for old, new in repl.items():
        assert old in text
        text = text.replace(old, new)
    return text


@pytest.mark.parametrize("value", ["1e3", "4.5e2", "450.0", "4.5E+2"])
def test_yaml_float_notation_is_a_number(capsys, tmp_path, value):
    cfg = tmp_path / "f.yaml"
    line = next(ln for ln in Path(TPU).read_text().splitlines() if "bandwidth_gbps" in ln)
    cfg.write_text(_tpu_text(**{line: line.split("bandwidth_gbps")[0] +
                                f"bandwidth_gbps: {value}"}))
    code, out, err = cli(capsys, "validate", str(cfg))
    assert code == 0, err
    code, out, _ = cli(capsys, "gemm", TPU, *GEMM, "--json", "--set",
                       f"units[0].memory.bandwidth_gbps={value}")
    assert code == 0
    assert json.loads(out)["extra"]["provenance"]["overrides"] == [
        f"units[0].memory.bandwidth_gbps={value}"]


@pytest.mark.parametrize("override, needle", [
    # 1e-300 GB/s: the int cycle count overflowed float (OverflowError) before the bounds
    ("units[0].memory.bandwidth_gbps=1.0e-300",
     "--set units[0].memory.bandwidth_gbps: 1e-300 GB/s (1e9 bytes/s) is outside any "
     "hardware; expected 1e-06 to"),
    ("units[0].clock_mhz=1.0e-300",
     "--set units[0].clock_mhz: 1e-300 MHz is outside any hardware; expected 0.001 to"),
    ("units[0].rows=1180591620717411303424",          # 2**70
     "--set units[0].rows: 1.18059e+21 is outside any hardware; expected 1 to 2,147,483,648"),
    ("units[0].clock_mhz=0", "--set units[0].clock_mhz: expected a value > 0 MHz, got 0"),
])
def test_impossible_values_are_errors(capsys, override, needle):
    bad(capsys, needle, "gemm", TPU, *GEMM, "--set", override)


def test_rows_2_70_in_a_file_names_file_and_line(capsys, tmp_path):
    cfg = tmp_path / "big.yaml"
    cfg.write_text(_tpu_text(**{"rows: 128": "rows: 1180591620717411303424"}))
    line = bad(capsys, "units[0].rows: 1.18059e+21 is outside any hardware", "validate",
               str(cfg))
    assert line.startswith(f"config error: {cfg}:")


def test_implausible_value_warns_and_runs(capsys):
    code, out, err = cli(capsys, "gemm", TPU, *GEMM, "--set", "units[0].rows=1000000000")
    assert code == 0
    assert ("warning: --set units[0].rows: 1e+09 is outside the range of real hardware "
            "(1 to 16,777,216)") in err
    assert "latency" in out


def test_infeasible_gpu_design_is_one_line(capsys):
    line = bad(capsys, "no feasible CTA tile (shared memory or registers too small)", "run",
               "gpu/a100", "--set", "units[0].sm.smem_bytes_per_sm=1")
    # every op fails for the same reason: one line that counts them (gpt2-small: 73 ops)
    assert "gpt2-small:blocks.0.attn.qkv (and 72 more ops)" in line


def test_capacity_zero_says_unchecked(capsys):
    code, out, _ = cli(capsys, "gemm", TPU, *GEMM, "--set", "units[0].memory.capacity_gb=0")
    assert code == 0
    assert "capacity not checked (the design gives no memory.capacity_gb)" in out


# ---- flags --------------------------------------------------------------------------------
@pytest.mark.parametrize("args, needle", [
    (("run", "tpu_like", "--refine", "-3"), "argument --refine: expected an integer >= 0"),
    (("run", "tpu_like", "--w-format", ""), "argument --w-format: expected a non-empty value"),
    (("run", "tpu_like", "--a-format", " "), "argument --a-format: expected a non-empty value"),
    (("trace", "tpu_like", "--model", "gpt2-small", "--out", "t.json", "--w-format", ""),
     "argument --w-format: expected a non-empty value"),
    (("sweep", "s.yaml", "--db", "x.sqlite", "--workers", "0"),
     "argument --workers: expected an integer >= 1"),
    # seeds: numpy refuses a negative seed with a traceback that names no flag
    (("serve", "gpu/h100", "--model", "gpt2-small", "--rate", "1", "--duration", "1",
      "--seed", "-1"), "argument --seed: expected an integer >= 0"),
    (("plan", "gpu/h100", "--model", "gpt2-small", "--devices", "2", "--phase", "train",
      "--doc-lengths", "100", "--doc-seed", "-1"), "argument --doc-seed: expected an integer >= 0"),
    (("run", "tpu_like", "--seed", "-2"), "argument --seed: expected an integer >= 0"),
])
def test_bad_flag_values(capsys, args, needle):
    bad(capsys, needle, *args)


def test_unsupported_sparsity_pattern_warns(capsys):
    # k = 70 is a multiple of 7, so the weights are 3:7-pruned; SAT's muxes support 1:2,
    # 2:4, 2:8 and 1:8 only (configs/fpga/sat_vcu1525.yaml), so the result is the dense one
    code, out, err = cli(capsys, "gemm", "sat_vcu1525", "--m", "64", "--n", "64", "--k",
                         "70", "--sparsity", "3:7")
    assert code == 0
    assert ("warning: --sparsity 3:7 changed nothing: sat_vcu1525 runs 3:7-sparse weights "
            "dense") in err
    code, _, err = cli(capsys, "gemm", "sat_vcu1525", "--m", "64", "--n", "64", "--k", "64",
                       "--sparsity", "2:4")
    assert code == 0 and "changed nothing" not in err


def test_unsupported_format_names_the_native_ones(capsys):
    line = bad(capsys, "activation format fp16 is wider than the PE's int16 multiplier",
               "run", "eyeriss_like", "--model", "resnet50", "--a-format", "fp16")
    # 54 matrix ops of ResNet-50 fail: the count is right, and the native format is named
    assert "resnet50:conv1 (and 53 more ops)" in line
    assert "eyeriss_like computes natively in pe_array: int16" in line


def test_same_width_substitution_is_said(capsys):
    code, _, err = cli(capsys, "gemm", "tpu_like", *GEMM, "--a-format", "fp16")
    assert code == 0
    assert ("warning: --a-format fp16: tpu_like's mxu computes in bf16; fp16 operands are "
            "modelled as bf16 (same width)") in err
    code, _, err = cli(capsys, "gemm", "tpu_like", *GEMM, "--a-format", "bf16")
    assert code == 0 and err == ""


@pytest.mark.parametrize("design", [
    "eyeriss_like",
    *(pytest.param(d, marks=pytest.mark.slow) for d in
      ("nvdla_like", "shidiannao_like", "hetero/nvdla_shidiannao"))])
def test_map_works_out_of_the_box_in_the_design_format(capsys, design):
    code, out, err = cli(capsys, "map", design, "--model", "resnet50")
    assert code == 0, err
    assert "(design's native)" in out


# ---- models -------------------------------------------------------------------------------
def test_non_model_file_as_model(capsys, tmp_path):
    y = tmp_path / "model.yaml"
    y.write_text("a: 1\n")
    bad(capsys, f"--model: '{y}' is a file name, but archsim reads models only from a zoo "
        f"name", "run", "tpu_like", "--model", str(y))
    fake = tmp_path / "net.onnx"
    fake.write_text("not protobuf")
    bad(capsys, f"{fake}: cannot read ONNX model", "run", "tpu_like", "--model", str(fake))


def test_hf_config_garbage_and_huge(capsys, tmp_path):
    g = tmp_path / "config.json"
    g.write_bytes(b"\xff\xfe" + os.urandom(64))
    bad(capsys, "not a text file (byte 0xff at offset 0 is not UTF-8)", "run", "tpu_like",
        "--model", str(g))
    g.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 10**7,
                             "hidden_size": 4096, "num_attention_heads": 32,
                             "intermediate_size": 11008, "vocab_size": 32000,
                             "max_position_embeddings": 4096}))
    bad(capsys, f"{g} num_hidden_layers: expected an int <= 1,024 (far beyond any published "
        f"model), got 10,000,000", "run", "tpu_like", "--model", str(g))


# ---- work-size guards ----------------------------------------------------------------------
def test_absurd_replica_count_is_refused_before_building_the_cluster(capsys, tmp_path):
    """10^8 replicas once built 10^8 engine objects for minutes until the machine ran out
    of memory; now one line naming the flag, at once, and no timeline file."""
    tl = tmp_path / "t.json"
    line = bad(capsys, "engines to simulate; at most 131,072", "serve", "gpu/h100", "--model",
               "gpt2-small", "--rate", "1", "--duration", "1", "--replicas", "100000000",
               "--timeline", str(tl))
    assert line.startswith("workload error: --replicas: 100,000,000 replicas")
    assert not tl.exists()
    bad(capsys, "--decode-replicas: 200,000 replicas", "serve", "gpu/h100", "--model",
        "gpt2-small", "--rate", "1", "--duration", "1", "--decode-replicas", "200000")


def test_huge_cycle_run_is_refused_before_it_starts(capsys):
    line = bad(capsys, "expected at most 1e+10 per op at cycle fidelity: use --fidelity "
               "analytical", "gemm", "tpu_like", "--m", "1000000", "--n", "1000000", "--k",
               "1000000", "--fidelity", "cycle")
    assert line.startswith("workload error: --fidelity: op gemm would simulate ~")


@pytest.mark.slow
def test_huge_trace_is_refused_with_the_estimate(capsys, tmp_path):
    out = tmp_path / "t.json"
    line = bad(capsys, "task events", "trace", "tpu_like", "--model", "llama2-7b", "--out",
               str(out))
    assert "expected at most 2,000,000: pick ops with --op" in line
    assert not out.exists()


def test_trace_output_folder_missing(capsys, tmp_path):
    bad(capsys, "--out: cannot write", "trace", "tpu_like", "--model", "gpt2-small", "--out",
        str(tmp_path / "no" / "t.json"))


# ---- result stores -------------------------------------------------------------------------
SPEC = f"""
base: {TPU}
axes:
  - {{key: "units[0].rows", values: [8, 16]}}
  - {{key: "units[0].cols", values: [8, 16]}}
workloads:
  - {{gemm: [32, 32, 32]}}
"""


@pytest.fixture()
def spec_file(tmp_path: Path) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(SPEC)
    return p


@pytest.fixture(scope="module")
def sweep_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("db") / "r.sqlite"
    run_sweep(parse_spec_text(SPEC), db, workers=1, progress=False)
    return db


def _store_cases(tmp_path: Path) -> list[tuple[str, str]]:
    notdb = tmp_path / "notes.sqlite"
    notdb.write_text("hello\n")
    rnd = tmp_path / "random.sqlite"
    rnd.write_bytes(os.urandom(4096))
    folder = tmp_path / "folder"
    folder.mkdir()
    return [(str(notdb), "is not an SQLite database; expected a result store"),
            (str(rnd), "is not an SQLite database; expected a result store"),
            (str(folder), "is a folder; expected a result store file"),
            (str(tmp_path / "missing" / "r.sqlite"), "no folder")]


def test_db_flag_on_bad_paths(capsys, tmp_path, spec_file):
    for db, needle in _store_cases(tmp_path):
        line = bad(capsys, needle, "sweep", str(spec_file), "--db", db, "--no-progress")
        assert db in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_db_read_only(capsys, tmp_path, spec_file, sweep_db):
    ro = tmp_path / "ro.sqlite"
    shutil.copy(sweep_db, ro)
    ro.chmod(0o444)
    bad(capsys, "is read-only", "sweep", str(spec_file), "--db", str(ro), "--no-progress")


def test_report_results_plot_on_non_sqlite(capsys, tmp_path):
    notdb = tmp_path / "x.sqlite"
    notdb.write_text("not a database")
    out = tmp_path / "rep"
    bad(capsys, "is not an SQLite database", "report", str(notdb), "-o", str(out))
    assert not out.exists()                       # nothing written before the store opened
    bad(capsys, "is not an SQLite database", "results", str(notdb))
    bad(capsys, "is not an SQLite database", "plot", "pareto", str(notdb), "-o",
        str(tmp_path / "p.png"))


def test_plot_heatmap_unknown_axis(capsys, tmp_path, sweep_db):
    out = tmp_path / "h.png"
    line = bad(capsys, "--x: no axis 'units[0].bogus'", "plot", "heatmap", str(sweep_db),
               "--x", "units[0].bogus", "--y", "units[0].cols", "-o", str(out))
    assert "its axes: units[0].rows, units[0].cols" in line
    assert not out.exists()


def test_plot_without_suffix_writes_nothing(capsys, tmp_path, sweep_db):
    bad(capsys, "-o: cannot tell the file type of", "plot", "pareto", str(sweep_db), "-o",
        str(tmp_path / "noext"))
    assert list(tmp_path.iterdir()) == []          # neither 'noext' nor 'noext.png'


def test_plot_writes_atomically(capsys, tmp_path, sweep_db):
    out = tmp_path / "p.svg"
    code, o, _ = cli(capsys, "plot", "pareto", str(sweep_db), "-o", str(out))
    assert code == 0 and o.strip() == f"wrote {out}"
    assert out.read_text().lstrip().startswith("<?xml")
    assert [p.name for p in tmp_path.iterdir()] == ["p.svg"]   # no temp file left
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask         # a normal file mode


def test_atomic_output_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.json"
    with pytest.raises(KeyboardInterrupt), atomic_output(target, "--out") as tmp:
        tmp.write_text('{"partial": ')
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_output(target, "--out") as tmp:
        tmp.write_text("new but broken")
        raise RuntimeError("boom")
    assert target.read_text() == "old"             # the previous file is untouched


# ---- sweep specs --------------------------------------------------------------------------
def test_sweep_whose_points_all_fail_exits_2(capsys, tmp_path):
    p = tmp_path / "fail.yaml"
    p.write_text(SPEC.replace("{gemm: [32, 32, 32]}", "{model: resnet1000}"))
    code, out, err = cli(capsys, "sweep", str(p), "--db", str(tmp_path / "f.sqlite"),
                         "--no-progress")
    assert code == 2
    assert f"error: all 4 tasks of {p} failed; the first: workload error: model: unknown " \
           f"model 'resnet1000'" in one_error(err)
    p.write_text(SPEC.replace("{gemm: [32, 32, 32]}", "{gemm: [32, 32, 32], a_format: fp99}"))
    code, _, err = cli(capsys, "sweep", str(p), "--db", str(tmp_path / "g.sqlite"),
                       "--no-progress")
    assert code == 2 and "unknown number format 'fp99'" in one_error(err)


def test_duplicate_axis_is_reported_on_its_own_line(capsys, tmp_path):
    p = tmp_path / "dup.yaml"
    p.write_text(SPEC.replace('values: [8, 16]}}\n', 'values: [8, 16]}}\n', 1)
                 .replace('  - {key: "units[0].cols", values: [8, 16]}',
                          '  - {key: "units[0].cols", values: [8, 16]}\n'
                          '  - {key: "units[0].rows", values: [32]}'))
    # line 1 is empty (the f-string starts with a newline): base 2, axes 3, items 4, 5, 6
    bad(capsys, f"{p}:6 axes[2].key: axis 'units[0].rows' given twice (first as axes[0])",
        "sweep", str(p), "--db", str(tmp_path / "d.sqlite"))


def test_huge_grid_is_refused(capsys, tmp_path):
    ten = {"rows": range(1, 11), "cols": range(1, 11), "pe_register_bytes": range(1, 11),
           "global_buffer_kib": range(1, 11), "glb_width_bits": range(8, 18),
           "clock_mhz": range(100, 110), "vector_lanes": range(10),
           "memory.bandwidth_gbps": range(1, 11), "memory.capacity_gb": range(1, 11),
           "memory.efficiency": [x / 10 for x in range(1, 11)]}
    axes = "".join(f'  - {{key: "units[0].{k}", values: {list(v)}}}\n' for k, v in ten.items())
    p = tmp_path / "huge.yaml"
    p.write_text(f"base: {TPU}\naxes:\n{axes}workloads:\n  - {{gemm: [8, 8, 8]}}\n")
    bad(capsys, "axes: the grid has 1e+10 tasks (points x workloads); expected at most "
        "1,000,000", "sweep", str(p), "--db", str(tmp_path / "h.sqlite"))


def test_cosearch_hook_with_wrong_signature(capsys, tmp_path):
    src = ROOT / "examples" / "nasaic"
    for f in ("cosearch.yaml", "hetero.yaml"):
        shutil.copy(src / f, tmp_path / f)
    (tmp_path / "badacc.py").write_text("def cifar10(net, dataset):\n    return 0.9\n"
                                        "def text(net):\n    return 'high'\n")
    spec = tmp_path / "cosearch.yaml"
    spec.write_text(spec.read_text().replace('"accuracy:', '"badacc:'))
    code, _, err = cli(capsys, "cosearch", str(spec), "--db", str(tmp_path / "c.sqlite"))
    assert code == 2 and "Traceback" not in err
    assert "badacc:cifar10 has signature cifar10(net, dataset); expected a function of one " \
           "argument" in err
    assert "the accuracy predictor returned 'high'" in err and "expected a number" in err


# ---- provenance, rerun, compare ------------------------------------------------------------
def test_json_result_carries_provenance_and_reruns(capsys, tmp_path):
    code, out, _ = cli(capsys, "gemm", "tpu_like", *GEMM, "--batch", "2", "--json", "--set",
                       "units[0].rows=64", "--sparsity", "2:4")
    assert code == 0
    d = json.loads(out)
    p = d["extra"]["provenance"]
    assert p["design"] == "tpu_like" and p["overrides"] == ["units[0].rows=64"]
    assert (p["batch"], p["a_format"], p["w_format"], p["formats_from"]) == \
        (2, "bf16", "bf16", "design")                       # tpu_like: bf16 multipliers
    assert (p["sparsity"], p["fidelity"], p["mapping"], p["tp"]) == ("2:4", "analytical",
                                                                     "default", 1)
    assert p["input_hash"] == d["input_hash"] and p["archsim_version"] == d["archsim_version"]
    f = tmp_path / "r.json"
    f.write_text(out)
    code, out2, err = cli(capsys, "rerun", str(f), "--json")
    assert code == 0 and "reproduced (same input hash" in err
    assert json.loads(out2)["latency_s"] == d["latency_s"]
    f.write_text(out.replace(d["input_hash"], "0" * 16))
    code, _, err = cli(capsys, "rerun", str(f))
    assert code == 1 and "input hash differs" in err
    f.write_text("[1, 2")
    bad(capsys, "not a JSON result", "rerun", str(f))


def test_text_header_names_overrides_and_workload(capsys):
    code, out, _ = cli(capsys, "run", "tpu_like", "--model", "gpt2-small", "--phase", "decode",
                       "--context", "64", "--batch", "3", "--set", "units[0].cols=64")
    assert code == 0
    head = out.splitlines()[:3]
    assert head[0] == "design   tpu_like --set units[0].cols=64"
    assert head[1] == ("workload gpt2-small (decode), batch 3, context 64, formats bf16/bf16 "
                       "(design's native)")
    assert head[2] == "run      fidelity analytical, mapping default, objective latency"


def test_compare_side_by_side_and_csv(capsys):
    code, out, _ = cli(capsys, "compare", "tpu_like", "eyeriss_like", "--model", "resnet18",
                       "--csv")
    assert code == 0
    rows = [r.split(",") for r in out.splitlines()]
    assert rows[0] == ["metric", "tpu_like", "eyeriss_like"]
    table = {r[0]: r[1:] for r in rows[1:]}
    assert table["format"] == ["bf16", "int16"]
    lat = [float(x) for x in table["latency"]]
    energy = [float(x) for x in table["energy"]]
    power = [float(x) for x in table["power"]]
    assert all(v > 0 and math.isfinite(v) for v in lat + energy)
    assert power == pytest.approx([e / t for e, t in zip(energy, lat)], rel=1e-9)
    code, out, _ = cli(capsys, "compare", "tpu_like", "eyeriss_like", "--model", "resnet18")
    assert code == 0 and out.splitlines()[1].split() == ["tpu_like", "eyeriss_like"]


@pytest.mark.parametrize("flags,names", [
    (("--engine", "vllm-async"), "--engine"),                         # not a known engine
    (("--engine", "vllm", "--iteration-overhead-ms", "1"), "--iteration-overhead-ms"),
])
def test_serve_engine_errors_name_the_flag_and_write_nothing(capsys, tmp_path, flags, names):
    tl = tmp_path / "tl.json"
    code, out, err = cli(capsys, "serve", "gpu/h100", "--model", "llama3-8b",
                         "--concurrency", "2", "--isl", "64", "--osl", "4",
                         "--timeline", str(tl), *flags)
    assert code == 2 and names in err and "Traceback" not in err
    assert not tl.exists() and not list(tmp_path.iterdir())
