"""One command that runs every notebook's GPU path and records its results: the GPU acceptance run.

On a machine with one GPU and PyTorch (Jupyter is not needed), this runs every notebook of the manifest, in
teaching order, as plain Python (``tools/record_reference.py``), each in the profile the manifest gives it for a
GPU (``gpu_profile``: full where a full run takes a minute or two, quick where it takes longer), within a
deadline for all of them (570 s by default, so the whole run fits 10 minutes). Each notebook's result record goes
to ``results/reference/<gpu>/`` (``<gpu>`` from the device's name, e.g. ``nvidia-h100-80gb-hbm3``) and its log
to ``build/acceptance/``; the last lines printed are a table of notebook, profile, outcome, seconds and the
claims' verdicts. The exit status is 0 only if every notebook ran to its end and no claim was contradicted.

    python tools/gpu_acceptance.py                       # every notebook on cuda, as the manifest says
    python tools/gpu_acceptance.py --only memory,sharding --profile quick
    LABKIT_DEVICE=cpu python tools/gpu_acceptance.py --results build/cpu-acceptance   # the same run on a CPU
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tools")]

import own_checkout  # noqa: E402, F401  (before labkit: this checkout's labkit, or a clear stop)

# isort: split
from record_reference import VERDICTS, run_notebooks  # noqa: E402

from labkit.lab import manifest  # noqa: E402


def device_folder(device: str) -> str:
    """``results/reference``'s folder name for ``device``: its reported name, lower case, words joined by '-'."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        name = torch.cuda.get_device_name(dev)
    elif dev.type == "mps":
        name = "apple-mps"
    else:
        name = "cpu"
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def plan(only: str | None, profile: str | None) -> list[tuple[Path, str]]:
    """The notebooks to run, in teaching order, each with its profile (``profile`` overrides the manifest's)."""
    entries = list(manifest.NOTEBOOKS)
    if only:
        wanted = [s.strip() for s in only.split(",") if s.strip()]
        unknown = [s for s in wanted if s not in manifest.slugs()]
        if unknown or not wanted:
            raise SystemExit(f"--only names notebooks by slug, one of: {', '.join(manifest.slugs())}; got {only!r}")
        entries = [e for e in entries if e.slug in wanted]
    return [(ROOT / "notebooks" / e.file, profile or e.gpu_profile) for e in entries]


def table(rows) -> str:
    lines = ["| notebook | profile | outcome | seconds | holds | undecided | contradicted |", "|---" * 7 + "|"]
    for slug, profile, outcome, seconds, counts in rows:
        verdicts = ["-"] * 3 if counts is None else [str(counts[v]) for v in VERDICTS]
        lines.append(f"| {slug} | {profile} | {outcome} | {seconds:.0f} | " + " | ".join(verdicts) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=os.environ.get("LABKIT_DEVICE", "cuda"), help="cuda, cuda:N, mps, cpu")
    parser.add_argument("--profile", choices=["quick", "full"], help="one profile for all (default: the manifest's)")
    parser.add_argument("--only", help="comma-separated slugs (default: every notebook)")
    parser.add_argument("--results", type=Path, help="default: results/reference/<gpu>/")
    parser.add_argument("--logs", type=Path, default=ROOT / "build" / "acceptance")
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds one notebook may take")
    parser.add_argument("--deadline", type=float, default=570.0, help="seconds for all of them together")
    args = parser.parse_args(argv)
    if args.timeout <= 0 or args.deadline <= 0:
        parser.error("--timeout and --deadline must be positive numbers of seconds")
    jobs = plan(args.only, args.profile)
    results = args.results or ROOT / "results" / "reference" / device_folder(args.device)
    print(f"{len(jobs)} notebooks on {args.device}; records to {results}, logs to {args.logs}", flush=True)
    rows = run_notebooks(jobs, args.device, results, args.logs, args.timeout, args.deadline)
    print("\n" + table(rows))
    ok = all(r[2] == "ok" for r in rows) and not any(r[4] and r[4]["contradicted"] for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
