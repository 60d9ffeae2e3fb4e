"""Every error labkit raises on purpose, in one place.

Each one subclasses ``LabError`` (catch them all) and the built-in error it behaves like, so code that already
catches ``MemoryError`` or ``AssertionError`` keeps working. Every message says what went wrong and what to do.
"""

from __future__ import annotations

from collections.abc import Callable


class LabError(Exception):
    """Base class of every error labkit raises on purpose."""


class MeasurementError(LabError, RuntimeError):
    """The function under measurement raised; nothing was measured."""


class DoesNotFitError(LabError, MemoryError):
    """An experiment needs more memory than the device has. Taught in notebook `memory`."""


class DistributedRunError(LabError, RuntimeError):
    """A worker failed, was killed, or the run passed its deadline. Every worker has been stopped.

    Taught in notebook `multiple_gpus`.

    ``port`` is the rendezvous port the run used (released by the time this is raised).
    """

    def __init__(self, message: str, port: int | None = None):
        super().__init__(message)
        self.port = port


class ClaimContradicted(LabError, AssertionError):
    """A timing claim was measured confidently on the wrong side of its margin (strict mode only)."""


class PlotStyleError(LabError, AssertionError):
    """A figure breaks the suite's plotting rules; the message lists each breach."""


class SetupProblem(LabError, RuntimeError):
    """Something in the installation is broken; the message says what and how to fix it."""


class CheckpointError(LabError, RuntimeError):
    """A checkpoint is missing, incomplete or corrupt, or belongs to another model. Taught in notebook `checkpoints`."""


class TrainerStopped(LabError, RuntimeError):
    """A background training job exited, at start or inside a window whose speed was asked for; the message
    carries its exit code and the end of what it printed (the trainer of notebook `sharing_a_gpu`)."""


class LabWarning(UserWarning):
    """A warning labkit gives on purpose (a noisy measurement, ...): shown to a learner as one plain line."""


def plain_lab_warnings(format_warning: Callable[..., str]) -> Callable[..., str]:
    """``warnings.formatwarning`` that shows a :class:`LabWarning` as ``labkit: message`` (no file, line or source
    of labkit's own code, which a learner cannot act on), and every other warning as ``format_warning`` does.

    Installed by ``labkit.start`` (notebook `start_here`); installing it twice wraps it once.
    """
    if getattr(format_warning, "plain_lab_warnings", False):
        return format_warning

    def formatted(message, category, filename, lineno, line=None):
        if isinstance(category, type) and issubclass(category, LabWarning):
            return f"labkit: {message}\n"
        return format_warning(message, category, filename, lineno, line)

    formatted.plain_lab_warnings = True  # type: ignore[attr-defined]
    return formatted
