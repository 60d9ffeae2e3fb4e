"""A wheel of this checkout's labkit, and a scratch environment that borrows the test environment's dependencies.

Used by tests/test_wheel.py (a non-editable install imports every subpackage) and tests/test_hosted.py (the
notebooks' install cell installs labkit where it is missing). The scratch environment has no pip and no labkit:
a path file lends it the test environment's installed packages (torch and the rest), not its editable labkit.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

from conftest import ROOT


def labkit_wheel(work: Path) -> Path:
    """Build a wheel of labkit from a copy of this checkout's sources into ``work/dist``; its path."""
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "labkit", source / "labkit", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"),
         str(source)],
        check=True, timeout=300, capture_output=True,
    )  # fmt: skip
    (wheel,) = (work / "dist").glob("labkit-*.whl")
    return wheel


def scratch_python(env_dir: Path) -> tuple[Path, Path]:
    """A new virtual environment without pip or labkit that sees the test environment's packages: (python, site)."""
    venv.create(env_dir, with_pip=False)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = Path(subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())  # fmt: skip
    (site / "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python, site
