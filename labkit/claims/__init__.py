"""Timing claims decided as statistics: **holds**, **contradicted** or **undecided** (every notebook).

Two modules: :mod:`.rounds` measures the variants in interleaved rounds and turns them into the quantity a claim is
about; :mod:`.verdicts` decides it (bootstrap intervals, the three verdicts, strict mode). Their public names are
here: ``labkit.claims.compare``, ``labkit.claims.ratio``, ``labkit.claims.HOLDS``, ...
"""

from ..core.errors import ClaimContradicted, MeasurementError
from .rounds import block_timer, calls_per_block, compare, exponent, from_rounds, predicted, ratio, restate, rotated
from .verdicts import CLAIMS_ENV, CONTRADICTED, HOLDS, UNDECIDED, Claim, Expectation, decide, noisy_run, report, strict

__all__ = [
    "CLAIMS_ENV",
    "CONTRADICTED",
    "HOLDS",
    "UNDECIDED",
    "Claim",
    "ClaimContradicted",
    "Expectation",
    "MeasurementError",
    "block_timer",
    "calls_per_block",
    "compare",
    "decide",
    "exponent",
    "from_rounds",
    "noisy_run",
    "predicted",
    "ratio",
    "report",
    "restate",
    "rotated",
    "strict",
]
