"""Timing claims decided as statistics: **holds**, **contradicted** or **undecided** (every notebook).

Imports core. Its modules (this part is written by tools/render_docs.py):

rounds: Deciding claims on measurements: the variants timed in interleaved rounds, then judged (every notebook).
statements: What a timing claim says, written as a value before anything is measured (every notebook).
verdicts: Verdicts on timing claims: the statistics behind :mod:`labkit.claims` (every notebook).
"""

from ..core.errors import ClaimContradicted, MeasurementError
from .rounds import block_timer, calls_per_block, decide, measures, rotated
from .statements import (
    CONTRADICTED,
    HOLDS,
    UNDECIDED,
    Claim,
    Condition,
    Expectation,
    Outcome,
    Quantity,
    constant,
    exponent,
    fitted,
    quantity,
    ratio,
    stat,
)
from .verdicts import CLAIMS_ENV, ClaimLog, Verdict, judge, noisy_run, report, strict, table

__all__ = [
    "CLAIMS_ENV",
    "CONTRADICTED",
    "HOLDS",
    "UNDECIDED",
    "Claim",
    "ClaimLog",
    "ClaimContradicted",
    "Condition",
    "Expectation",
    "MeasurementError",
    "Outcome",
    "Quantity",
    "Verdict",
    "block_timer",
    "calls_per_block",
    "constant",
    "decide",
    "exponent",
    "fitted",
    "judge",
    "measures",
    "noisy_run",
    "quantity",
    "ratio",
    "report",
    "rotated",
    "stat",
    "strict",
    "table",
]
