"""The course's hosted-notebook pieces, written from the one repository address in pyproject.toml.

``[project.urls] Repository`` names where the course is published. From it tools/render_docs.py writes:

- every notebook's first code cell (tagged ``hosted-install``): where ``labkit`` cannot be imported (a notebook
  opened on Google Colab, or in a Jupyter that lacks it), it installs labkit with the notebooks' extras from that
  repository with pip; where labkit can be imported it only looks, and touches neither pip nor the network;
- the README's Binder badge and "Open in Colab" link, and docs/hosted.md's pip command and Colab links.

Standard library and nbformat only: render_docs imports it before anything else runs.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from urllib.parse import quote

import nbformat

TAG = "hosted-install"
# myst-nb leaves a cell tagged remove-cell out of the book: the book was built where labkit was installed already.
BOOK_TAG = "remove-cell"
# Colab opens a notebook from a branch of the repository; the course is published from this one.
BRANCH = "main"
FIRST_NOTEBOOK = "start_here"
GITHUB = re.compile(r"https://github\.com/(?P<owner>[A-Za-z0-9][\w.-]*)/(?P<name>[\w.-]+?)(?:\.git)?/?")

CELL = """\
# @title Install labkit where this Jupyter lacks it (Colab, a fresh environment); elsewhere it does nothing
import importlib.util
import subprocess
import sys

if importlib.util.find_spec("labkit") is None:
    requirement = "labkit @ {source}"
    print(f"labkit is not installed here: pip install {{requirement!r}} ...")
    pip = [sys.executable, "-m", "pip", "install", requirement]
    try:
        subprocess.check_output(pip, stderr=subprocess.STDOUT)
    except subprocess.CalledProcessError as failed:
        output = failed.output.decode(errors="replace")[-2000:]
        raise RuntimeError(f"pip install {{requirement!r}} failed:\\n{{output}}") from None
    importlib.invalidate_caches()"""


def repository(root: Path) -> str:
    """The address in ``root``'s pyproject.toml ``[project.urls] Repository``; a clear stop if it is missing or is
    not a GitHub repository's address (Binder's ``gh/`` and Colab's ``github/`` links need one)."""
    project = tomllib.loads((root / "pyproject.toml").read_text()).get("project", {})
    address = project.get("urls", {}).get("Repository")
    if not isinstance(address, str) or not GITHUB.fullmatch(address):
        raise SystemExit(
            f"pyproject.toml: [project.urls] Repository must be a GitHub address, https://github.com/OWNER/NAME "
            f"(the Binder badge, the Colab links and the notebooks' install cell are written from it); got {address!r}"
        )
    return address


def _owner_name(address: str) -> tuple[str, str]:
    found = GITHUB.fullmatch(address)
    if not found:
        raise ValueError(f"not a GitHub repository's address (https://github.com/OWNER/NAME): {address!r}")
    return found["owner"], found["name"]


def cell_source(source: str) -> str:
    """The install cell's code, installing ``labkit`` (no extras: the hosted Jupyter is already there) from ``source``: ``git+<repository address>`` in the
    notebooks; a test passes a local wheel's ``file://`` address to try the same code offline."""
    if not source or any(c in source for c in '"\\\n'):
        raise ValueError(f"a pip source is one line without quotes or backslashes, got {source!r}")
    return CELL.format(source=source)


def install_cell(address: str) -> nbformat.NotebookNode:
    """The install cell for the repository at ``address``: collapsed to its title on Colab, left out of the book."""
    cell = nbformat.v4.new_code_cell(cell_source(f"git+{address}"))
    cell.id = TAG
    cell.metadata = {"cellView": "form", "tags": [TAG, BOOK_TAG]}
    return cell


def with_install_cell(text: str, address: str, where: str) -> str:
    """A notebook's JSON text with the install cell for ``address`` as its first code cell (replacing an older one),
    written the way nbformat writes it (which is how the notebooks are stored)."""
    nb = nbformat.reads(text, as_version=4)
    old = [i for i, c in enumerate(nb.cells) if TAG in c.metadata.get("tags", [])]
    if len(old) > 1:
        raise SystemExit(f"{where}: {len(old)} cells are tagged {TAG!r}; a notebook has one install cell")
    for i in old:
        del nb.cells[i]
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), None)
    if first_code is None:
        raise SystemExit(f"{where}: no code cell, so nothing for the install cell to come before")
    nb.cells.insert(first_code, install_cell(address))
    return nbformat.writes(nb) + "\n"


def readme_links(address: str) -> str:
    """The README's badges: Binder (JupyterLab on notebook `start_here`) and Colab (the same notebook)."""
    owner, name = _owner_name(address)
    path = f"notebooks/{FIRST_NOTEBOOK}.ipynb"
    binder = f"https://mybinder.org/v2/gh/{owner}/{name}/HEAD?labpath={quote(path, safe='')}"
    return (
        f"[![Binder](https://mybinder.org/badge_logo.svg)]({binder}) "
        f"[![Open in Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab_link(address, path)})"
    )


def pip_command(address: str) -> str:
    """docs/hosted.md's install command: what the notebooks' install cell runs, for a hub's image or a terminal."""
    return f'```bash\npython -m pip install "labkit @ git+{address}"\n```'


def clone_command(address: str) -> str:
    """The README's and the pre-flight page's first command: clone the course from ``address``."""
    return f"```bash\ngit clone {address}.git ai-workload-lab && cd ai-workload-lab\n```"


def colab_link(address: str, path: str) -> str:
    """Where Colab opens the file ``path`` of the repository at ``address`` (its branch :data:`BRANCH`)."""
    owner, name = _owner_name(address)
    return f"https://colab.research.google.com/github/{owner}/{name}/blob/{BRANCH}/{path}"


def colab_table(address: str, notebooks: list[tuple[str, str]]) -> str:
    """docs/hosted.md's table: each notebook (slug, title) in teaching order with its Colab link."""
    rows = ["| notebook | open it on Colab |", "|---|---|"]
    rows += [f"| `{slug}`: {title} | [{slug}.ipynb]({colab_link(address, f'notebooks/{slug}.ipynb')}) |"
             for slug, title in notebooks]  # fmt: skip
    return "\n".join(rows)
