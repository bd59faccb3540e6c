"""`archsim rerun` is a verifier (issue 29, item 5): a result whose recorded inputs were
edited (model, batch, overrides, version, the top-level restatement, the hash) is refused
with one line naming the field, never called "reproduced"; an argv of another command is
refused, not launched."""

from __future__ import annotations

import json

import pytest

from archsim.cli import main


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("r") / "r.json"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["run", "tpu_like", "--model", "resnet18", "--a-format", "int8",
                     "--w-format", "int8", "--json"]) == 0
    path.write_text(buf.getvalue())
    return json.loads(buf.getvalue())


def _rerun(tmp_path, data: dict, capsys) -> tuple[int, str]:
    f = tmp_path / "edited.json"
    f.write_text(json.dumps(data))
    capsys.readouterr()
    rc = main(["rerun", str(f)])
    return rc, capsys.readouterr().err


def test_untouched_result_reproduces(tmp_path, result, capsys):
    rc, err = _rerun(tmp_path, result, capsys)
    assert rc == 0 and "reproduced" in err


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["extra"]["provenance"].update(model="resnet50"), "provenance.model"),
    (lambda d: d["extra"]["provenance"].update(batch=8), "provenance.batch"),
    (lambda d: d["extra"]["provenance"].update(overrides=["units[0].rows=64"]),
     "provenance.overrides"),
    (lambda d: d["extra"]["provenance"].update(archsim_version="9.9"),
     "provenance.archsim_version"),
    (lambda d: d.update(workload="gpt2-small"), "workload"),
    (lambda d: d.update(input_hash="0" * 16), "input_hash"),
])
def test_edited_inputs_are_refused(tmp_path, result, capsys, edit, field):
    data = json.loads(json.dumps(result))
    edit(data)
    rc, err = _rerun(tmp_path, data, capsys)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and field in lines[0] and "reproduced" not in err


def test_argv_of_another_command_is_not_run(tmp_path, result, capsys):
    data = json.loads(json.dumps(result))
    data["extra"]["provenance"]["argv"] = ["serve", "gpu/h100", "--model", "llama3-8b"]
    rc, err = _rerun(tmp_path, data, capsys)
    assert rc == 2 and "verifies only" in err and len(err.strip().splitlines()) == 1
