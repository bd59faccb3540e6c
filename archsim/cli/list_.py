"""``archsim list``: reference configs, clusters, zoo models or number formats."""

from __future__ import annotations

import argparse

from archsim.api import config_dir, list_configs
from archsim.arch.cluster import list_clusters
from archsim.workloads.formats import FORMATS
from archsim.workloads.zoo import model_names

HELP = "list reference configs, clusters, zoo models or number formats"


def add_arguments(ls: argparse.ArgumentParser) -> None:
    """What to list."""
    ls.add_argument("what", choices=("configs", "clusters", "models", "formats"))


def run(args: argparse.Namespace) -> int:
    """One name per line (formats with their width and kind)."""
    if args.what == "configs":
        base = config_dir()
        for p in list_configs():
            print(p.relative_to(base.parent).as_posix())
    elif args.what == "clusters":               # archsim plan / run with a parallel plan
        for p in list_clusters():
            print(p.relative_to(config_dir().parent).as_posix())
    elif args.what == "models":
        for n in model_names():
            print(n)
    else:
        for f in FORMATS.values():
            print(f"{f.name:<10} {f.bits_per_element:g} bits ({f.kind})")
    return 0
