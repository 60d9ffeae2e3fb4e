"""A busy neighbour: keep one CPU core busy, on and off, while a command runs (a browser, a second job, a CI
neighbour). Timing claims must survive it (they are decided statistically, see labkit.claims).

    python tools/neighbour.py -- make test                     # 1.5 s busy, 1.5 s idle, for the whole command
    python tools/neighbour.py --idle 0 -- make notebooks       # busy all the time
    python tools/neighbour.py --busy 1 --idle 2 --max-s 600    # no command: run for 10 minutes, then stop

The busy work is a pure-Python spin in a child process (one core, whatever torch does). The neighbour stops when
the command ends, when --max-s passes, or on Ctrl-C; its exit status is the command's.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import subprocess
import sys
import time


def spin(busy_s: float, idle_s: float, max_s: float) -> None:
    end = time.monotonic() + max_s
    while time.monotonic() < end:
        until = min(end, time.monotonic() + busy_s)
        while time.monotonic() < until:
            pass  # one core at 100%
        if idle_s > 0:
            time.sleep(max(0.0, min(idle_s, end - time.monotonic())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--busy", type=float, default=1.5, help="seconds of 100%% CPU per cycle (default 1.5)")
    parser.add_argument("--idle", type=float, default=1.5, help="seconds idle per cycle; 0 = always busy (1.5)")
    parser.add_argument("--max-s", type=float, default=3600.0, help="stop after this many seconds (default 3600)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run beside it")
    args = parser.parse_args(argv)
    if args.busy <= 0 or args.idle < 0 or args.max_s <= 0:
        parser.error("--busy and --max-s must be positive and --idle must be 0 or more")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    neighbour = mp.get_context("spawn").Process(target=spin, args=(args.busy, args.idle, args.max_s), daemon=True)
    neighbour.start()
    label = "always busy" if args.idle == 0 else f"{args.busy:g} s busy / {args.idle:g} s idle"
    print(f"neighbour: one core {label} (pid {neighbour.pid})", file=sys.stderr, flush=True)
    try:
        if not command:
            neighbour.join()
            return 0
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 130
    finally:
        neighbour.terminate()
        neighbour.join(timeout=5)


if __name__ == "__main__":
    sys.exit(main())
