"""Command line.

``python -m colab_gpu doctor``  prints the runtime report with advice.
``python -m colab_gpu bench``   measures this runtime and writes bench.json and bench.md.
"""

from __future__ import annotations

import argparse
import json
import sys

from .doctor import format_runtime_report, runtime_report
from .hardware.device import DeviceNotAvailableError, get_device, require_cuda_if_asked


def doctor(as_json: bool = False) -> int:
    """Print what this runtime offers and what to do about it; exit code 1 if REQUIRE_CUDA fails."""
    report = runtime_report()
    if as_json:  # what the GPU suite records: the host beside the GPU, probed (a launch-bound figure is the host's)
        from .measure.host import host_record

        report["host"] = host_record("cuda:0" if report["gpus"] else "cpu")
    print(json.dumps(report, indent=2) if as_json else format_runtime_report(report))
    try:
        require_cuda_if_asked()
    except DeviceNotAvailableError as err:
        print(f"\nERROR: {err}", file=sys.stderr)
        return 1
    return 0


def bench(device_name: str | None, only: list[str] | None, out: str) -> int:
    """Run the benchmarks on the chosen device and write their results under ``out``.

    bench.json is rewritten after every experiment, with each experiment's seconds and row keys: a run that is
    stopped part-way still leaves what it measured (the GPU suite reads it)."""
    from .bench import run_benchmarks
    from .bench.output import write_json, write_results

    device = get_device(device_name)
    done: list = []
    experiments: dict[str, dict] = {}

    def keep(name, rows, seconds):
        done.extend(rows)
        experiments[name] = {"seconds": round(seconds, 2), "keys": [row.key for row in rows]}
        write_json(done, out, experiments)

    rows = run_benchmarks(device, only, on_experiment=keep)
    for path in write_results(rows, out, experiments):
        print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m colab_gpu", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    doctor_cmd = commands.add_parser("doctor", help="report this runtime and give advice")
    doctor_cmd.add_argument("--json", action="store_true", help="print the report as JSON")
    bench_cmd = commands.add_parser("bench", help="measure this runtime; write bench.json and bench.md")
    bench_cmd.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: the best one here)")
    bench_cmd.add_argument("--only", nargs="+", default=None, help="run only these benchmarks")
    bench_cmd.add_argument("--out", default="build/bench", help="output folder (default: build/bench)")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        return doctor(as_json=args.json)
    if args.command == "bench":
        try:
            return bench(args.device, args.only, args.out)
        except (ValueError, DeviceNotAvailableError) as err:
            print(f"ERROR: {err}", file=sys.stderr)
            return 2
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover - argparse catches it first
    return 2
