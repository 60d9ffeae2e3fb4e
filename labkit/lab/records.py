"""Records: the hardware + software card stamped on every result, and results saved as JSON.

Taught in notebook `start_here` ("what to record with any benchmark"). A number without its machine,
versions, dtype, thread count and profile cannot be compared with anyone else's.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import tempfile
from importlib import metadata
from pathlib import Path

import torch

from ..core import environment
from ..core.device import describe
from ..core.result import to_jsonable

RESULTS_ENV = "LABKIT_RESULTS_DIR"
REFERENCE_DIRNAME = Path("results") / "reference"


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def gpu_driver_version() -> str | None:
    """The NVIDIA driver version, if NVML can be asked (None elsewhere)."""
    if not torch.cuda.is_available():
        return None
    try:
        import pynvml  # shipped with some CUDA set-ups; optional

        pynvml.nvmlInit()
        return pynvml.nvmlSystemGetDriverVersion()
    except Exception:
        pass
    try:
        import subprocess

        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def _allocator_tuned() -> bool:
    from ..core import allocator

    return allocator.applied


def machine_card(
    device: torch.device | str, dtype: torch.dtype | str | None = None, profile: str | None = None
) -> dict:
    """Everything needed to compare a result with someone else's: hardware, software, settings."""
    device = torch.device(device)
    card = describe(device)
    card.update(
        torch=torch.__version__,
        torchvision=_version("torchvision"),
        torchao=_version("torchao"),
        numpy=_version("numpy"),
        labkit=_version("labkit"),
        python=platform.python_version(),
        os=f"{platform.system()} {platform.release()}",
        machine=platform.machine(),
        cuda=torch.version.cuda if device.type == "cuda" else None,
        cudnn=torch.backends.cudnn.version() if device.type == "cuda" else None,
        driver=gpu_driver_version() if device.type == "cuda" else None,
        dtype=str(dtype).removeprefix("torch.") if dtype is not None else None,
        profile=profile,
        allocator="glibc, freed memory kept in the process" if _allocator_tuned() else "default",
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    )
    return card


def write_json_atomic(path: str | os.PathLike, data) -> Path:
    """Write ``data`` as JSON so that readers see the old file or the new one, never half of one."""
    return write_text_atomic(path, json.dumps(to_jsonable(data), indent=2, allow_nan=False) + "\n")


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to a temporary file beside ``path``, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _is_checkout(folder: Path) -> bool:
    return (folder / "pyproject.toml").is_file() and (folder / "notebooks").is_dir() and (folder / "labkit").is_dir()


def project_root() -> Path | None:
    """The checkout of the course: the one labkit is installed from (editable install), else the nearest folder at
    or above the working directory that holds the course (a plain install run from a clone, as on Colab or Binder),
    else None.
    """
    package_parent = Path(__file__).resolve().parents[2]  # labkit/lab/records.py -> the folder holding labkit/
    if _is_checkout(package_parent):
        return package_parent
    here = Path.cwd().resolve()
    return next((folder for folder in (here, *here.parents) if _is_checkout(folder)), None)


def results_dir() -> Path:
    """Where notebooks write their results: ``$LABKIT_RESULTS_DIR``, else ``build/results``. Taught in notebook `where_time_goes`."""
    chosen = environment.get(RESULTS_ENV)
    if chosen is not None:
        return chosen
    root = project_root()
    return (root / "build" / "results") if root else Path.home() / ".cache" / "labkit" / "results"


def shown_path(path: str | os.PathLike) -> str:
    """``path`` as it is printed for a learner: relative to the course's checkout when inside it
    (``build/results/where_time_goes_trace.json``), else under ``~`` when in the home folder, else as it is.

    Taught in notebook `where_time_goes`. A path printed whole names the machine that ran the notebook (its
    user and folders), which the book then shows to every reader; from the checkout it reads the same anywhere.
    """
    where = Path(path).resolve()
    for base, shown in ((project_root(), ""), (Path.home(), "~/")):
        if base is not None and where.is_relative_to(base.resolve()):
            return shown + str(where.relative_to(base.resolve()))
    return str(path)


class ResultLog:
    """A notebook's results: named entries plus the machine card, saved as one JSON file.

    >>> log = ResultLog("start_here", card)          # doctest: +SKIP
    >>> log.add("matmul fp32", timing_record, tflops=0.4)  # doctest: +SKIP
    >>> log.save()                                        # doctest: +SKIP
    """

    def __init__(self, notebook: str, card: dict):
        self.notebook = notebook
        self.card = card
        self.results: dict[str, dict] = {}
        self.summary: dict[str, object] = {}
        self.claims: list[dict] = []

    def add(self, name: str, record=None, **values) -> dict:
        """Store one result under ``name``: a record (timing, memory, ...) and/or plain values."""
        entry = {}
        if record is not None:
            entry.update(to_jsonable(record))
        entry.update(to_jsonable(values))
        self.results[name] = entry
        return entry

    def headline(self, **values) -> None:
        """Key numbers shown in the report's summary table (short names, units in the name)."""
        self.summary.update(to_jsonable(values))

    def add_claim(self, claim) -> None:
        """Record a decided timing claim (:class:`labkit.claims.Verdict`); the report lists each verdict."""
        entry = to_jsonable(claim.to_dict())
        entry.pop("samples", None)  # the per-round samples stay in the notebook; the verdict travels
        self.claims.append(entry)

    def to_dict(self) -> dict:
        return dict(
            notebook=self.notebook, card=self.card, summary=self.summary, results=self.results, claims=self.claims
        )

    def save(self, directory: str | os.PathLike | None = None) -> Path:
        directory = Path(directory) if directory is not None else results_dir()
        return write_json_atomic(directory / f"{self.notebook}.json", self.to_dict())


def load_reference(notebook: str, root: str | os.PathLike | None = None) -> list[dict]:
    """Reference results recorded on datacenter GPUs for ``notebook`` (an empty list if none yet).

    Looks in ``results/reference/<gpu>/<notebook>.json`` of the checkout.
    """
    base = Path(root) if root is not None else (project_root() or Path.cwd())
    found = []
    for path in sorted((base / REFERENCE_DIRNAME).glob(f"*/{notebook}.json")):
        data = json.loads(path.read_text())
        data["source_file"] = str(path.relative_to(base))
        found.append(data)
    return found


def card_line(card: dict) -> str:
    """One line naming the machine and software of a card, for labels and captions. Taught in notebook `optimisation`."""
    parts = [card.get("device_name", "?"), f"torch {card.get('torch', '?')}"]
    if card.get("cuda"):
        parts.append(f"CUDA {card['cuda']}")
    if card.get("driver"):
        parts.append(f"driver {card['driver']}")
    n = card.get("torch_threads", "?")
    parts.append(f"{n} thread{'' if n == 1 else 's'}")
    if card.get("profile"):
        parts.append(f"profile {card['profile']}")
    return ", ".join(str(p) for p in parts)
