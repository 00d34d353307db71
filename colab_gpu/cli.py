"""Command line: ``python -m colab_gpu doctor`` prints the runtime report with advice."""

from __future__ import annotations

import argparse
import json
import sys

from .device import DeviceNotAvailableError, require_cuda_if_asked
from .runtime import format_report, runtime_report


def doctor(as_json: bool = False) -> int:
    """Print what this runtime offers and what to do about it; exit code 1 if REQUIRE_CUDA fails."""
    report = runtime_report()
    print(json.dumps(report, indent=2) if as_json else format_report(report))
    try:
        require_cuda_if_asked()
    except DeviceNotAvailableError as err:
        print(f"\nERROR: {err}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m colab_gpu", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    doctor_cmd = commands.add_parser("doctor", help="report this runtime and give advice")
    doctor_cmd.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        return doctor(as_json=args.json)
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover - argparse catches it first
    return 2
