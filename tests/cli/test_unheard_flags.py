"""Flags that do not apply are said, not silently dropped (issue 29, item 2, first cases):
``--seq``/``--context`` on a CNN and ``--refine`` without a mapping search each give one
warning naming the flag, and the result is the one without the flag."""

from __future__ import annotations

import json

import pytest

from archsim.cli import main

BASE = ["run", "tpu_like", "--model", "resnet18", "--a-format", "int8", "--w-format", "int8"]


def _run(capsys, *extra: str) -> tuple[dict, list[str]]:
    assert main([*BASE, *extra, "--json"]) == 0
    out, err = capsys.readouterr()
    return json.loads(out), [ln for ln in err.splitlines() if ln.startswith("warning:")]


@pytest.mark.parametrize("extra, flag", [(("--seq", "512"), "--seq 512"),
                                         (("--context", "64"), "--context 64"),
                                         (("--refine", "3"), "--refine 3")])
def test_flag_that_does_not_apply_is_named(capsys, extra, flag):
    plain, quiet = _run(capsys)
    res, warns = _run(capsys, *extra)
    assert not quiet
    assert len(warns) == 1 and flag in warns[0] and "ignored" in warns[0], warns
    assert res["latency_s"] == plain["latency_s"] and res["energy_j"] == plain["energy_j"]


def test_refine_with_a_search_is_quiet(capsys):
    assert main(["map", "tpu_like", "--model", "resnet18", "--a-format", "int8", "--w-format",
                 "int8", "--refine", "1"]) == 0
    assert "--refine" not in capsys.readouterr().err
