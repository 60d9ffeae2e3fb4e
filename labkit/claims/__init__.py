"""Timing claims decided as statistics: **holds**, **contradicted** or **undecided** (every notebook).

Three modules: :mod:`.statements` writes a claim as a value (a sentence, a condition on a quantity, a
prediction) before anything is measured; :mod:`.rounds` measures the variants in interleaved rounds and
:func:`decide` decides claims on them; :mod:`.verdicts` holds the statistics (bootstrap intervals, the three
verdicts, strict mode). Their public names are here: ``labkit.claims.Claim``, ``labkit.claims.decide``,
``labkit.claims.ratio``, ...
"""

from ..core.errors import ClaimContradicted, MeasurementError
from .rounds import block_timer, calls_per_block, decide, rotated
from .statements import (
    CONTRADICTED,
    HOLDS,
    UNDECIDED,
    Claim,
    Condition,
    Expectation,
    Quantity,
    constant,
    exponent,
    fitted,
    quantity,
    ratio,
    stat,
)
from .verdicts import CLAIMS_ENV, Verdict, judge, noisy_run, report, strict

__all__ = [
    "CLAIMS_ENV",
    "CONTRADICTED",
    "HOLDS",
    "UNDECIDED",
    "Claim",
    "ClaimContradicted",
    "Condition",
    "Expectation",
    "MeasurementError",
    "Quantity",
    "Verdict",
    "block_timer",
    "calls_per_block",
    "constant",
    "decide",
    "exponent",
    "fitted",
    "judge",
    "noisy_run",
    "quantity",
    "ratio",
    "report",
    "rotated",
    "stat",
    "strict",
]
