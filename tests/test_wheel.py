"""labkit as a plain (non-editable) install gets it: a wheel built from the checkout, installed in a scratch
virtual environment, imported from outside the checkout.

A wheel that lists only the top package holds no subpackage, and ``import labkit`` then fails on ``labkit.core``;
the editable install every other test uses cannot show that. The scratch environment borrows the test
environment's installed dependencies (torch and the rest) through a path file, but not its editable labkit.
"""

import subprocess
import sys
from pathlib import Path

import pytest
from scratch_env import labkit_wheel, scratch_python

from labkit.lab import records

pytestmark = pytest.mark.processes

IMPORT_EVERYTHING = """
import importlib, json, pkgutil, sys
import labkit
names = sorted(m.name for m in pkgutil.walk_packages(labkit.__path__, "labkit."))
for name in names:
    importlib.import_module(name)
from labkit.lab import records
root = records.project_root()
print(json.dumps(dict(file=labkit.__file__, modules=names, root=None if root is None else str(root),
                      references=[r["source_file"] for r in records.load_reference("start_here")])))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A scratch environment's python with labkit installed from a wheel built out of this checkout."""
    work = tmp_path_factory.mktemp("wheel")
    wheel = labkit_wheel(work)
    python, site = scratch_python(work / "env")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index",
         str(wheel)],
        check=True, timeout=300,
    )  # fmt: skip
    return python, site


def _import_everything(python: Path, cwd: Path) -> dict:
    import json

    out = subprocess.run([python, "-c", IMPORT_EVERYTHING], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_wheel_holds_every_subpackage_and_imports_outside_the_checkout(installed, root, tmp_path):
    python, site = installed
    got = _import_everything(python, tmp_path)
    assert Path(got["file"]).is_relative_to(site), f"labkit came from {got['file']}, not the installed wheel"
    expected = sorted(
        ".".join(("labkit", *p.relative_to(root / "labkit").with_suffix("").parts)).removesuffix(".__init__")
        for p in (root / "labkit").rglob("*.py")
        if p.name != "__main__.py"
    )
    expected.remove("labkit")
    assert sorted(set(got["modules"]) - {"labkit.__main__"}) == expected
    assert got["root"] is None and got["references"] == []  # outside any checkout: nothing to show, said so


def test_a_plain_install_run_from_the_checkout_shows_the_shipped_references(installed, root):
    """As on Colab or Binder: labkit installed from a wheel, the notebooks opened from a clone of the course."""
    python, _ = installed
    got = _import_everything(python, root / "notebooks")
    assert got["root"] == str(root)
    shipped = sorted(str(p.relative_to(root)) for p in (root / records.REFERENCE_DIRNAME).glob("*/start_here.json"))
    assert shipped and got["references"] == shipped
