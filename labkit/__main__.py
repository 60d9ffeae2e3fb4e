"""Command line: ``python -m labkit doctor``, ``python -m labkit report`` and ``python -m labkit settings``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """``python -m labkit``: the report, doctor and settings commands."""
    parser = argparse.ArgumentParser(prog="python -m labkit", description="AI Workload Lab helpers")
    sub = parser.add_subparsers(dest="command", required=True)
    doc = sub.add_parser("doctor", help="check the set-up, print the machine card and measured ceilings")
    doc.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    doc.add_argument("--no-ceilings", action="store_true", help="skip the short ceiling measurements")
    rep = sub.add_parser("report", help="execute every notebook with papermill and write build/report.html")
    rep.add_argument("--profile", default="quick", help="quick, full or auto (default: quick)")
    rep.add_argument("--notebooks", default="notebooks", help="folder of notebooks (default: notebooks)")
    rep.add_argument("--build", default="build", help="output folder (default: build)")
    rep.add_argument("--only", nargs="*", default=None, help="notebook names to run (default: all)")
    sub.add_parser("settings", help="list every LABKIT_* environment variable: meaning, allowed values, default")
    args = parser.parse_args(argv)

    if args.command == "settings":
        from .core.environment import markdown_table

        print(markdown_table())
        return 0

    if args.command == "doctor":
        from .lab.doctor import run

        return run(args.device, ceilings=not args.no_ceilings)
    from .lab.report import main as report_main

    return report_main(args.notebooks, args.build, args.profile, args.only)


if __name__ == "__main__":
    sys.exit(main())
