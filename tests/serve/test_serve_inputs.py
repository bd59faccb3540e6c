"""Request sources and the CLI's error paths: one line naming file:line / flag, exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from archsim.cli import main as archsim_main
from archsim.serve.requests import (
    LengthDist,
    load_trace,
    parse_length,
    shipped_traces,
    synthesize,
    trace_path,
    write_trace,
)
from archsim.workloads.errors import WorkloadError


def main(argv):
    """``archsim serve ARGV`` (the command's old entry point)."""
    return archsim_main(["serve", *argv])


def test_poisson_rate_and_lognormal_median():
    # 4000 arrivals at 50/s: the count over 80 s is Poisson(4000): +-3 sigma = +-190
    r = synthesize(50.0, 80.0, LengthDist("lognormal", 300, 0.5), LengthDist("fixed", 7), seed=1)
    assert abs(len(r) - 4000) < 190
    assert np.median([q.prompt_tokens for q in r]) == pytest.approx(300, rel=0.05)
    assert {q.output_tokens for q in r} == {7}


def test_gamma_arrivals_have_the_requested_cv():
    r = synthesize(10.0, 500.0, LengthDist("fixed", 8), LengthDist("fixed", 8), seed=2,
                   arrival="gamma", cv=3.0)
    gaps = np.diff([q.arrival_s for q in r])
    assert gaps.mean() == pytest.approx(0.1, rel=0.15)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.2)


def test_trace_round_trip(tmp_path):
    r = synthesize(5.0, 4.0, LengthDist("uniform", 1, 9), LengthDist("uniform", 1, 9), seed=4)
    for suf in (".csv", ".jsonl"):
        p = tmp_path / f"t{suf}"
        write_trace(r, p)
        back = load_trace(p)
        assert [(q.prompt_tokens, q.output_tokens) for q in back] == \
            [(q.prompt_tokens, q.output_tokens) for q in r]


def test_shipped_traces_load():
    names = shipped_traces()
    assert {"sharegpt_like", "azure_conv_like", "azure_code_like"} <= set(names)
    for n in names:
        assert len(load_trace(trace_path(n))) >= 100


@pytest.mark.parametrize("text,line", [
    ("arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.5,ten,5\n", 3),
    ("arrival_s,prompt_tokens,output_tokens\n0,10,5\n1,10\n", 3),
    ("arrival_s,prompt_tokens,output_tokens\n1,10,5\n0.5,10,5\n", 3),
    ("arrival_s,prompt_tokens,output_tokens\n0,0,5\n", 2),
    ("arrival,prompt,output\n0,1,1\n", 1),
])
def test_bad_csv_names_file_and_line(tmp_path, text, line):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(WorkloadError) as e:
        load_trace(p)
    assert f"bad.csv:{line}" in str(e.value)


def test_bad_jsonl_names_file_and_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps({"arrival_s": 0, "prompt_tokens": 3, "output_tokens": 2}) + "\n"
                 + '{"arrival_s": 1, "prompt_tokens": 3}\n')
    with pytest.raises(WorkloadError) as e:
        load_trace(p)
    assert "bad.jsonl:2" in str(e.value) and "output_tokens" in str(e.value)


def test_cli_bad_trace_is_one_line_exit_2(tmp_path, capsys):
    p = tmp_path / "bad.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.1,10,-3\n")
    out_json = tmp_path / "tl.json"
    rc = main(["gpu/a100", "--model", "llama2-7b", "--trace", str(p), "--timeline",
               str(out_json)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and "bad.csv:3" in err and "output_tokens" in err
    assert not out_json.exists()                     # no partial output


@pytest.mark.parametrize("argv,where", [
    (["--rate", "1", "--duration", "1", "--slo", "ttft=fast"], "--slo"),
    (["--rate", "1", "--duration", "1", "--prompt", "lognormal:0:1"], "--prompt"),
    (["--rate", "1", "--duration", "1", "--kv-link", "warp"], "--kv-link"),
    (["--rate", "1"], "--duration"),
    (["--rate", "1", "--duration", "1", "--tp", "3"], "tp"),
    (["--rate", "1", "--duration", "1", "--pp", "3"], "--pp"),
    (["--rate", "1", "--duration", "1", "--ep", "2"], "--ep"),
    (["--rate", "1", "--duration", "1", "--cp", "2"], "--cp"),
    (["--rate", "1", "--duration", "1", "--plan", "tp2x"], "--plan"),
    (["--rate", "1", "--duration", "1", "--decode-design", "gpu/h100"], "--decode-design"),
    (["--rate", "1", "--duration", "1", "--decode-replicas", "1", "--decode-design",
      "gpu/nope"], "gpu/nope"),
])
def test_cli_bad_flags(capsys, argv, where):
    rc = main(["gpu/a100", "--model", "llama2-7b", *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and where in err


def test_cli_model_must_be_a_decoder(capsys):
    rc = main(["gpu/a100", "--model", "resnet50", "--rate", "1", "--duration", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and "--model" in err


def test_parse_length_forms():
    assert parse_length("7", "--x") == LengthDist("fixed", 7)
    assert parse_length("uniform:2:9", "--x") == LengthDist("uniform", 2, 9)
    with pytest.raises(WorkloadError):
        parse_length("uniform:9:2", "--x")


def test_cli_writes_json_timeline_and_plot(tmp_path, capsys):
    tl, png = tmp_path / "tl.json", tmp_path / "p.png"
    rc = main(["gpu/a100", "--model", "llama2-7b", "--rate", "2", "--duration", "3",
               "--prompt", "uniform:32:256", "--output", "8", "--scheduler", "sarathi",
               "--chunk", "128", "--slo", "ttft=1s,tpot=100ms,tbt_p99=200ms", "--json",
               "--timeline", str(tl), "--plot", str(png)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["finished"] == out["requests"] > 0
    assert out["slo"]["percentiles"] == [["tbt", 99.0, 0.2]]
    events = json.loads(tl.read_text())["traceEvents"]
    iters = [e for e in events if e["ph"] == "X"]
    assert sum(e["args"]["decodes"] for e in iters) > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".serve-*"))          # no temporary files left
