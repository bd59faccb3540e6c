"""The command table of ``archsim.cli``: every command keeps the contract, and adding a
command is one module + one table row (docs/architecture.md, "The command line")."""

from __future__ import annotations

import argparse
import types

import pytest

import archsim.cli as cli
from archsim.cli import COMMANDS, main


def test_every_command_has_help_add_arguments_and_run():
    for name, mod in COMMANDS.items():
        assert isinstance(mod.HELP, str) and mod.HELP, name
        assert callable(mod.add_arguments) and callable(mod.run), name


def test_help_lists_every_command(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    for name, mod in COMMANDS.items():
        assert name in out
        assert mod.HELP.split()[0] in out


def _toy() -> types.ModuleType:
    """A command module as a new command would write it."""
    toy = types.ModuleType("toy")
    toy.HELP = "add two numbers"

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("a", type=int)
        parser.add_argument("b", type=int)
        parser.add_argument("--json", action="store_true")

    def run(args: argparse.Namespace) -> int:
        print(f'{{"sum": {args.a + args.b}}}' if args.json else args.a + args.b)
        return 0 if args.a + args.b >= 0 else 1

    toy.add_arguments = add_arguments
    toy.run = run
    return toy


def test_a_toy_command_is_one_module_and_one_table_row(monkeypatch, capsys):
    monkeypatch.setitem(cli.COMMANDS, "toy", _toy())
    assert main(["toy", "2", "3"]) == 0
    assert capsys.readouterr().out == "5\n"
    assert main(["toy", "2", "-3", "--json"]) == 1
    assert capsys.readouterr().out == '{"sum": -1}\n'
    assert main([]) == 0
    assert "add two numbers" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:       # argparse usage error of the toy's own parser
        main(["toy", "2"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("archsim toy: error:") and len(err.splitlines()) == 1


def test_unknown_argument_is_named_by_the_commands_own_parser(capsys):
    with pytest.raises(SystemExit) as e:
        main(["list", "models", "--frobnicate"])
    assert e.value.code == 2
    assert capsys.readouterr().err == ("archsim list: error: unrecognized arguments: "
                                       "--frobnicate (see 'archsim list --help')\n")


@pytest.mark.parametrize("argv,needle", [
    (["run", "tpu_like", "--problem", "p.yaml"], "--problem applies to Timeloop inputs only"),
    (["map", "--timeloop", "a.yaml", "--problem", "p.yaml", "--model", "resnet18"],
     "--model cannot be used with Timeloop inputs"),
    (["run", "tpu_like", "--mapping", "bogus"], "argument --mapping: invalid choice: 'bogus'"),
])
def test_flags_of_the_other_input_kind_are_usage_errors(capsys, argv, needle):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.splitlines()) == 1
