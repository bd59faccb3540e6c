"""``python -m archsim``: the command line (:mod:`archsim.cli`)."""

from archsim.cli import entry

entry()
