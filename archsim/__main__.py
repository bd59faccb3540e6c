from archsim.cli import entry

entry()
