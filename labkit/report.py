"""``make report``: execute every notebook headless with papermill and write one HTML report.

The report is the main job for CI and instructors: the executed notebooks, a summary table of
each notebook's recorded results (from its ``ResultLog``) and the hardware/software card.
"""

from __future__ import annotations

import html
import json
import os
import time
from pathlib import Path

from .records import RESULTS_ENV, card_line, load_reference, write_json_atomic, write_text_atomic
from .widgets import HEADLESS_ENV


def run_notebook(
    notebook: str | os.PathLike,
    output: str | os.PathLike,
    profile: str = "quick",
    results_dir: str | os.PathLike | None = None,
    timeout_s: int = 600,
) -> dict:
    """Execute ``notebook`` with papermill (``PROFILE`` injected) into ``output``.

    Returns ``{"notebook", "status", "wall_s", "error"}``; a failing cell does not raise, it is
    reported, and the executed notebook (with the traceback) is still written for inspection.
    """
    import papermill as pm

    notebook, output = Path(notebook), Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    env_before = {name: os.environ.get(name) for name in (RESULTS_ENV, HEADLESS_ENV)}
    os.environ[HEADLESS_ENV] = "1"  # the kernel inherits it: labkit.interact runs without widgets
    if results_dir is not None:
        os.environ[RESULTS_ENV] = str(Path(results_dir).resolve())
    start = time.perf_counter()
    status, error = "ok", None
    try:
        pm.execute_notebook(
            str(notebook),
            str(output),
            parameters={"PROFILE": profile},
            kernel_name="python3",
            cwd=str(notebook.parent),
            progress_bar=False,
            execution_timeout=timeout_s,
        )
    except Exception as exc:  # PapermillExecutionError, a dead kernel, a timeout
        status = "failed"
        error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
    finally:
        for name, value in env_before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return dict(notebook=notebook.stem, status=status, wall_s=round(time.perf_counter() - start, 2), error=error)


def _notebook_html(path: Path) -> str:
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(template_name="lab").from_filename(str(path))
    return body


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(str(value))


def build_html(runs: list[dict], results: dict[str, dict], executed: dict[str, Path], profile: str) -> str:
    """The report page: summary table, machine card, reference results, executed notebooks."""
    cards = [r["card"] for r in results.values() if r.get("card")]
    rows = []
    for run in runs:
        name = run["notebook"]
        summary = results.get(name, {}).get("summary", {})
        headline = "<br>".join(f"{html.escape(k)}: {_fmt(v)}" for k, v in summary.items()) or "—"
        status = run["status"] if not run.get("error") else f"{run['status']}: {html.escape(run['error'])}"
        rows.append(
            f"<tr><td><a href='#{name}'>{html.escape(name)}</a></td><td>{status}</td>"
            f"<td>{run['wall_s']:.1f}</td><td>{headline}</td></tr>"
        )
    card_rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{_fmt(v)}</td></tr>"
        for k, v in (cards[0] if cards else {}).items()
        if v not in (None, "", [])
    )
    refs = []
    for run in runs:
        for ref in load_reference(run["notebook"]):
            items = "".join(f"<li>{html.escape(k)}: {_fmt(v)}</li>" for k, v in ref.get("summary", {}).items())
            refs.append(
                f"<h3>{html.escape(run['notebook'])} — {html.escape(card_line(ref['card']))}</h3><ul>{items}</ul>"
            )
    sections = []
    for run in runs:
        path = executed.get(run["notebook"])
        if path and path.exists():
            doc = html.escape(_notebook_html(path), quote=True)
            sections.append(
                f"<h2 id='{run['notebook']}'>{html.escape(run['notebook'])}</h2>"
                f"<iframe srcdoc=\"{doc}\" style='width:100%;height:80vh;border:1px solid #ccc'></iframe>"
            )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>AI Workload Lab report</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}}</style>
</head><body>
<h1>AI Workload Lab report</h1>
<p>Profile <b>{html.escape(profile)}</b>; {len([r for r in runs if r["status"] == "ok"])} of {len(runs)} notebooks ran.</p>
<h2>Summary</h2>
<table><tr><th>notebook</th><th>status</th><th>wall (s)</th><th>recorded results</th></tr>{"".join(rows)}</table>
<h2>Machine card</h2><table>{card_rows or "<tr><td>no results recorded</td></tr>"}</table>
<h2>Reference results from datacenter GPUs</h2>{"".join(refs) or "<p>None recorded yet.</p>"}
{"".join(sections)}
</body></html>
"""


def main(notebooks_dir: str = "notebooks", build_dir: str = "build", profile: str = "quick", only=None) -> int:
    """Run the notebooks, write ``build/report.html`` and ``build/runs.json``; 0 if all ran."""
    from .profiles import resolve_profile

    profile = resolve_profile(profile)
    build = Path(build_dir)
    results_dir = build / "results"
    paths = sorted(Path(notebooks_dir).glob("[0-9][0-9]_*.ipynb"))
    if only:
        paths = [p for p in paths if p.stem in only or p.name in only]
    if not paths:
        print(f"report: no notebooks found in {notebooks_dir!r}")
        return 1
    runs, executed = [], {}
    for path in paths:
        out = build / "notebooks" / path.name
        print(f"report: running {path.name} (profile {profile}) ...", flush=True)
        run = run_notebook(path, out, profile=profile, results_dir=results_dir)
        print(f"report:   {run['status']} in {run['wall_s']:.1f} s" + (f" — {run['error']}" if run["error"] else ""))
        runs.append(run)
        executed[path.stem] = out
    results = {}
    for run in runs:
        f = results_dir / f"{run['notebook']}.json"
        if f.exists():
            results[run["notebook"]] = json.loads(f.read_text())
    write_json_atomic(build / "runs.json", runs)
    report = write_text_atomic(build / "report.html", build_html(runs, results, executed, profile))
    print(f"report: wrote {report}")
    return 0 if all(r["status"] == "ok" for r in runs) else 1
