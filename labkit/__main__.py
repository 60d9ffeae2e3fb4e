"""Command line: ``python -m labkit lab | test | nb | doctor | book | report | settings | aiperf``, with or without make."""

from __future__ import annotations

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m labkit",
        description="AI Workload Lab: the course's commands (the Makefile's targets call these; on Windows, without "
        "make, run them with the virtual environment's Python: .venv\\Scripts\\python -m labkit lab)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the steps of lab, test, nb or book; run nothing")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("lab", help="JupyterLab on 127.0.0.1, opening notebooks/start_here.ipynb (other arguments go to it)")
    test = sub.add_parser("test", help="the test suite, or some of its tiers, in order (needs the clone's tests/)")
    test.add_argument(
        "tiers", nargs="*", metavar="tier", help="lint, unit, processes, notebooks, browser (default: all)"
    )
    nb = sub.add_parser("nb", help="one notebook as the notebooks tier runs it")
    nb.add_argument("notebook", nargs="?", help="its name: its file name without .ipynb")
    sub.add_parser("book", help="tools/build_book.py: every notebook executed into a static site (arguments go to it)")
    doc = sub.add_parser("doctor", help="check the set-up, print the machine card and measured ceilings")
    doc.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    doc.add_argument("--no-ceilings", action="store_true", help="skip the short ceiling measurements")
    rep = sub.add_parser("report", help="execute every notebook with papermill and write build/report.html")
    rep.add_argument("--profile", default="quick", help="quick, full or auto (default: quick)")
    rep.add_argument("--notebooks", default="notebooks", help="folder of notebooks (default: notebooks)")
    rep.add_argument("--build", default="build", help="output folder (default: build)")
    rep.add_argument("--only", nargs="*", default=None, help="notebook names to run (default: all)")
    sub.add_parser("settings", help="list every LABKIT_* environment variable: meaning, allowed values, default")
    sub.add_parser(
        "aiperf", help="make AIPerf's virtual environment once (notebook serving_endpoint); print its Python"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m labkit``: the course's commands; the exit code of what ran (2 for a command it cannot run)."""
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in ("lab", "book"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.dry_run and args.command not in ("lab", "test", "nb", "book"):
        parser.error(f"--dry-run goes with lab, test, nb or book, not {args.command}")

    if args.command in ("lab", "test", "nb", "book"):
        from .lab import commands

        given = {"test": getattr(args, "tiers", []), "nb": [args.notebook] if getattr(args, "notebook", None) else []}
        try:
            return commands.run(args.command, given.get(args.command, []), extra, dry_run=args.dry_run)
        except commands.CommandError as exc:
            print(f"python -m labkit {args.command}: {exc}", file=sys.stderr)
            return 2

    if args.command == "settings":
        from .core.environment import markdown_table

        print(markdown_table())
        return 0

    if args.command == "aiperf":
        from .serving.bench import aiperf_env, aiperf_venv_dir

        made = aiperf_env() is not None
        try:
            python = aiperf_env(create=True)
        except (RuntimeError, ValueError) as exc:
            print(f"python -m labkit aiperf: {exc}", file=sys.stderr)
            return 1
        print(f"AIPerf's environment {'is ready' if made else 'was made'}: {aiperf_venv_dir()} ({python})")
        return 0

    if args.command == "doctor":
        from .lab.doctor import run

        return run(args.device, ceilings=not args.no_ceilings)
    from .lab.report import main as report_main

    return report_main(args.notebooks, args.build, args.profile, args.only)


if __name__ == "__main__":
    sys.exit(main())
