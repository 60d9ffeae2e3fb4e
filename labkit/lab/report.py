"""``make report``: execute every notebook headless with papermill and write one HTML report.

The report is for learners, instructors and CI: one HTML file that opens offline, with a section per
notebook (its question, status, wall time and profile, its recorded results from its ``ResultLog``
beside any reference GPU's, and its plots embedded as images) and the hardware/software card. The
executed notebooks are kept beside it in ``build/notebooks/``.
"""

from __future__ import annotations

import html
import json
import os
import re
import time
from pathlib import Path

from ..claims.verdicts import CLAIMS_ENV, CONTRADICTED, HOLDS, UNDECIDED, noisy_run
from . import manifest
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
    reported, and the executed notebook (with the traceback) is still written for inspection. With
    ``results_dir``, the notebook's record there from an earlier run is removed first, so what is found
    there afterwards was written by this run.
    """
    import papermill as pm

    notebook, output = Path(notebook), Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    env_before = {name: os.environ.get(name) for name in (RESULTS_ENV, HEADLESS_ENV, CLAIMS_ENV)}
    os.environ[HEADLESS_ENV] = "1"  # the kernel inherits it: labkit.interact runs without widgets
    os.environ[CLAIMS_ENV] = "strict"  # a contradicted timing claim fails the notebook (labkit.claims)
    if results_dir is not None:
        os.environ[RESULTS_ENV] = str(Path(results_dir).resolve())
        # a previous run's record must not pass for this run's if the notebook fails before it saves one
        (Path(results_dir) / f"{notebook.stem}.json").unlink(missing_ok=True)
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


def _inline_markdown(text: str) -> str:
    """Escape ``text`` and keep its **bold** and `code` (enough for a notebook's question line)."""
    out = html.escape(" ".join(text.split()))
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def summarize_notebook(path: str | os.PathLike) -> dict:
    """What the report shows of an executed notebook: title, question, plots (PNG) and failures.

    Each plot is returned with the heading of the section it appears in, as its caption.
    """
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    title, question, section = Path(path).stem, "", ""
    plots, errors = [], []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# ") and title == Path(path).stem:
                    title = line[2:].strip()
                elif line.startswith("## "):
                    section = line[3:].strip()
            if not question and "**The question.**" in cell.source:
                paragraph = cell.source.split("**The question.**", 1)[1].split("\n\n", 1)[0]
                question = paragraph.strip()
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                errors.append(f"{output.get('ename')}: {output.get('evalue')}")
            png = output.get("data", {}).get("image/png") if "data" in output else None
            if png:
                plots.append({"png": "".join(png.split()), "caption": section})
    return {"title": title, "question": question, "plots": plots, "errors": errors}


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(str(value))


_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:auto;padding:1em 1.5em;color:#222;line-height:1.4}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f4f4f4}.ok{color:#1b7837}.failed{color:#b2182b;font-weight:bold}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{color:#555;font-size:90%}
section{border-top:2px solid #ddd;margin-top:2em}.meta{color:#555}code{background:#f4f4f4;padding:0 3px}
"""


def _claims_table(decided: list[dict]) -> str:
    """The notebook's timing claims, each with its measurement, interval and verdict (labkit.claims)."""
    if not decided:
        return "<h3>Timing claims</h3><p class='meta'>No timing claims were recorded.</p>"
    rows = "".join(
        f"<tr><td>{html.escape(c['statement'])}</td><td>{html.escape(c['expect'])}</td>"
        f"<td>{_fmt(c['estimate'])} [{_fmt(c['low'])}, {_fmt(c['high'])}]</td><td>{c['rounds']}</td>"
        f"<td class='{'ok' if c['verdict'] == 'holds' else 'failed' if c['verdict'] == 'contradicted' else 'meta'}'>"
        f"{html.escape(c['verdict'])}</td></tr>"
        for c in decided
    )
    return (
        "<h3>Timing claims</h3><table><tr><th>claim</th><th>claimed</th><th>measured [95% interval]</th>"
        f"<th>rounds</th><th>verdict</th></tr>{rows}</table>"
    )


def build_html(
    runs: list[dict],
    results: dict[str, dict],
    executed: dict[str, Path],
    profile: str,
    reference_root: str | os.PathLike | None = None,
) -> str:
    """The report page, one self-contained file: no script, no stylesheet or image fetched from anywhere.

    A summary table, the machine card, then one section per notebook: its question, status, wall
    time and profile, its recorded results beside any reference GPU's, and its plots (embedded).
    """
    cards = [r["card"] for r in results.values() if r.get("card")]
    summaries = {n: summarize_notebook(p) for n, p in executed.items() if p and Path(p).exists()}
    rows, sections = [], []
    for run in runs:
        name = run["notebook"]
        info = summaries.get(name, {"title": name, "question": "", "plots": [], "errors": []})
        status = f"<span class='{run['status']}'>{html.escape(run['status'])}</span>"
        rows.append(
            f"<tr><td><a href='#{name}'>{html.escape(name)}</a></td><td>{status}</td>"
            f"<td>{run['wall_s']:.1f}</td><td>{_inline_markdown(info['question'])}</td></tr>"
        )
        local = results.get(name, {})
        refs = load_reference(name, reference_root)
        headline = local.get("summary", {})
        keys = list(headline) + [k for ref in refs for k in ref.get("summary", {}) if k not in headline]
        if keys:
            head = "<th>result</th><th>this machine</th>" + "".join(
                f"<th>reference: {html.escape(card_line(ref['card']))}</th>" for ref in refs
            )
            body = "".join(
                f"<tr><td>{html.escape(k)}</td><td>{_fmt(headline.get(k, '—'))}</td>"
                + "".join(f"<td>{_fmt(ref.get('summary', {}).get(k, '—'))}</td>" for ref in refs)
                + "</tr>"
                for k in keys
            )
            table = f"<table><tr>{head}</tr>{body}</table>"
        else:
            table = "<p>No results recorded.</p>"
        if not refs:
            table += "<p class='meta'>No reference GPU results are recorded for this notebook yet.</p>"
        table += _claims_table(local.get("claims", []))
        failure = ""
        if run.get("error") or info["errors"]:
            failure = "<p class='failed'>" + html.escape("; ".join(info["errors"] or [run["error"]])) + "</p>"
        figures = "".join(
            f"<figure><img alt='{html.escape(p['caption'] or 'plot')}' src='data:image/png;base64,{p['png']}'>"
            f"<figcaption>{html.escape(p['caption'])}</figcaption></figure>"
            for p in info["plots"]
        )
        card = local.get("card")
        sections.append(
            f"<section id='{name}'><h2>{html.escape(info['title'])}</h2>"
            f"<p>{_inline_markdown(info['question'])}</p>"
            f"<p class='meta'>{status} in {run['wall_s']:.1f} s, profile {html.escape(profile)}"
            + (f"; {html.escape(card_line(card))}" if card else "")
            + f"</p>{failure}<h3>Results</h3>{table}"
            + (f"<h3>Plots</h3>{figures}" if figures else "")
            + "</section>"
        )
    card_rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{_fmt(v)}</td></tr>"
        for k, v in (cards[0] if cards else {}).items()
        if v not in (None, "", [])
    )
    ok = len([r for r in runs if r["status"] == "ok"])
    total = sum(r["wall_s"] for r in runs)
    decided = [c for r in results.values() for c in r.get("claims", [])]
    counts = ", ".join(f"{sum(c['verdict'] == v for c in decided)} {v}" for v in (HOLDS, UNDECIDED, CONTRADICTED))
    noisy = noisy_run(decided) if decided else None
    claims_line = f"Timing claims: {counts}." + (f" <span class='failed'>{html.escape(noisy)}</span>" if noisy else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>AI Workload Lab report</title>
<style>{_STYLE}</style>
</head><body>
<h1>AI Workload Lab report</h1>
<p>Profile <b>{html.escape(profile)}</b>: {ok} of {len(runs)} notebooks ran, in {total:.0f} s of wall time.
Every number below was measured on the machine in the card, on this run; reference results are labelled with
the GPU and software they came from.</p>
<p>{claims_line} Each claim was measured in interleaved rounds and decided on a 95% interval: it holds, is
contradicted (the notebook then fails), or is undecided (too noisy to tell on this run).</p>
<h2>Summary</h2>
<table><tr><th>notebook</th><th>status</th><th>wall (s)</th><th>the question</th></tr>{"".join(rows)}</table>
<h2>Machine card</h2><table>{card_rows or "<tr><td>no results recorded</td></tr>"}</table>
{"".join(sections)}
</body></html>
"""


def main(
    notebooks_dir: str = "notebooks",
    build_dir: str = "build",
    profile: str = "quick",
    only=None,
    reference_root: str | os.PathLike | None = None,
) -> int:
    """Run the notebooks, write ``build/report.html`` and ``build/runs.json``; 0 if all ran.

    Reference results are read from ``<reference_root>/results/reference/`` (default: this checkout).
    """
    from .sizes import resolve_profile

    profile = resolve_profile(profile)
    build = Path(build_dir)
    results_dir = build / "results"
    paths = sorted(Path(notebooks_dir).glob("*.ipynb"), key=manifest.sort_key)
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
    report = write_text_atomic(build / "report.html", build_html(runs, results, executed, profile, reference_root))
    print(f"report: wrote {report}")
    problem = noisy_run([c for r in results.values() for c in r.get("claims", [])])
    if problem:
        print(f"report: {problem}")
    return 0 if all(r["status"] == "ok" for r in runs) and problem is None else 1
