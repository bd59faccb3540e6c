"""Text output is inert (issue 29, item 6): a design name with a newline and a terminal
escape cannot forge an output line or drive the terminal; errors escape theirs too."""

from __future__ import annotations

from pathlib import Path

from archsim.cli import main
from archsim.workloads.errors import ConfigError, Problem, inert

ROOT = Path(__file__).resolve().parents[2]


def test_inert_escapes_controls_and_keeps_text():
    assert inert("tpu_like µs — naïve") == "tpu_like µs — naïve"
    assert inert("a\nb\rc\x1b[2J\u202e") == "a\\nb\\rc\\x1b[2J\\u202e"


def test_forged_design_name_stays_on_its_line(tmp_path, capsys):
    text = (ROOT / "configs/spatial/tpu_like.yaml").read_text().replace(
        "name: tpu_like", 'name: "tpu\\nlatency  0.000 s (forged)\\x1b[2J"')
    cfg = tmp_path / "evil.yaml"
    cfg.write_text(text)
    assert main(["run", str(cfg), "--model", "resnet18", "--a-format", "int8",
                 "--w-format", "int8"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert [ln for ln in out.splitlines() if ln.startswith("latency")][0].count("forged") == 0
    assert out.splitlines()[0] == "design   tpu\\nlatency  0.000 s (forged)\\x1b[2J"


def test_error_lines_escape_their_inputs():
    err = ConfigError(Problem("expected int, got 'x\ny'", "units[0].rows", "a\x1b.yaml", 3))
    assert "\n" not in err.render() and "\x1b" not in err.render()
