"""`pyccm sim kube`: argument parsing only; the server is imported when the command runs."""

from __future__ import annotations

import argparse


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("kube", help="the kube simulator (not built yet)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    print("not built yet")
    return 1
