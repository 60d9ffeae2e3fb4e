"""A real benchmark client against labkit's endpoint: NVIDIA AIPerf, from a virtual environment of its own.

Taught in notebook `serving_endpoint`. AIPerf (``pip install aiperf``, NVIDIA's successor to GenAI-Perf) is what a
team runs against vLLM, SGLang or TensorRT-LLM before a launch: it drives an OpenAI-compatible endpoint at a fixed
concurrency with synthetic prompts of a chosen length and reports time to first token, inter-token latency and
throughput percentiles. It pins its own pandas and numpy, so it lives in a virtual environment of its own
(:func:`aiperf_env`) and runs as a separate program (:func:`run_aiperf`), offline: it counts tokens with the
endpoint's byte-level tokenizer, shipped with labkit (``labkit/serving/tokenizer/``), read from a private
Hugging Face cache with ``HF_HUB_OFFLINE=1``, so nothing is fetched.

Two of AIPerf's names differ from vLLM's (``labkit.serving.metrics``): AIPerf's *inter token latency* is, per
request, (request latency − TTFT) / (output tokens − 1), which vLLM calls TPOT; the gaps between streamed chunks,
pooled over requests (vLLM's ITL), are AIPerf's *inter chunk latency*. :class:`AIPerfResult` keeps AIPerf's names.
Output tokens are the server's count (its ``usage``, AIPerf's ``--use-server-token-count``): the endpoint streams
one chunk per byte, and a byte that ends inside a UTF-8 character has no text of its own, so counting the text
would miscount; AIPerf times only chunks with text, as it would against vLLM.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..core import checks, environment
from ..core.procs import owned_tempdir
from ..core.result import Result

AIPERF_VERSION = "0.13.0"  # the version the lesson was written and checked with
VENV_ENV = "LABKIT_AIPERF_VENV"
STAMP = ".labkit-aiperf"  # written last, holding the pin: a venv without it (half made) is never used
TOKENIZER = "labkit/byte-level"  # the name AIPerf is given; a private HF cache maps it to labkit's tokenizer files
PERCENTILES = (50, 90, 99)
ENDPOINTS = ("completions", "chat")
SUPPORTED_PYTHONS = ((3, 11), (3, 12), (3, 13))  # aiperf 0.13.0 declares Requires-Python >=3.11,<3.14
_SNAPSHOT = "0" * 40  # the cache's one revision (a commit hash in form only)
_TAIL_CHARS = 3000
_UNITS = {"ms": 1e-3, "sec": 1.0, "s": 1.0, "ns": 1e-9, "us": 1e-6}  # AIPerf's time units, to seconds


def _checkout() -> Path | None:
    """The clone of the course labkit runs from (an editable install), else None."""
    root = Path(__file__).resolve().parents[2]
    is_clone = (root / "pyproject.toml").is_file() and (root / "notebooks").is_dir()
    return root if is_clone else None


def _user_cache() -> Path:
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "labkit"


def aiperf_venv_dir() -> Path:
    """Where AIPerf's virtual environment lives: ``$LABKIT_AIPERF_VENV`` if set, else ``.venv-aiperf`` in the clone
    of the course labkit runs from, else ``labkit/aiperf-<version>`` in the user's cache folder
    (``~/.cache`` on Linux). Used by :func:`aiperf_env`, notebook `serving_endpoint` and ``python -m labkit aiperf``."""
    chosen = environment.get(VENV_ENV)
    if chosen is not None:
        return Path(chosen)
    root = _checkout()
    return root / ".venv-aiperf" if root else _user_cache() / f"aiperf-{AIPERF_VERSION}"


def _venv_python(folder: Path) -> Path:
    # elsewhere (Windows) a virtual environment keeps its interpreter in Scripts\ instead of bin/
    return folder / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def _tail(text: str) -> str:
    return text[-_TAIL_CHARS:].strip()


def aiperf_env(create: bool = False) -> Path | None:
    """The Python of AIPerf's own virtual environment (:func:`aiperf_venv_dir`), or None where it is not made yet.

    Taught in notebook `serving_endpoint`. With ``create``, a missing (or half-made) one is made first: this
    Python's ``-m venv``, then ``pip install aiperf==0.13.0`` (about 1.2 GB and a minute or two: it brings pandas,
    transformers, pyarrow), then a stamp file holding the pin. Only a folder with that stamp is used, so an
    interrupted install is started again rather than used; a folder that is not a virtual environment is never
    removed. ``make aiperf`` runs this once.
    """
    folder = aiperf_venv_dir()
    python, stamp = _venv_python(folder), folder / STAMP
    pin = f"aiperf=={AIPERF_VERSION}"
    if python.exists() and stamp.is_file() and stamp.read_text().strip() == pin:
        return python
    if not create:
        return None
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _lock(folder.parent / f"{folder.name}.lock"):
        if python.exists() and stamp.is_file() and stamp.read_text().strip() == pin:
            return python  # made by another process while this one waited
        _create(folder, python, stamp, pin)
    return python


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (made if missing) for the block: one process makes the environment."""
    with open(path, "a") as handle:
        try:
            import fcntl
        except ImportError:  # elsewhere (Windows): no lock; two makers at once would each start the folder again
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes, or when the process dies
        yield


def _create(folder: Path, python: Path, stamp: Path, pin: str) -> None:
    if sys.version_info[:2] not in SUPPORTED_PYTHONS:
        raise RuntimeError(
            f"AIPerf {AIPERF_VERSION} installs on Python 3.11 to 3.13, and this is Python "
            f"{sys.version_info.major}.{sys.version_info.minor}: run this with one of those, or point {VENV_ENV} at "
            f"a virtual environment that has {pin} installed (and a file {STAMP} in it holding '{pin}')"
        )
    if folder.exists():
        if any(folder.iterdir()) and not (folder / "pyvenv.cfg").is_file():
            raise ValueError(
                f"{VENV_ENV} (or the default) names {folder}, which holds files but is not a virtual environment; "
                f"allowed: a missing or empty folder, or a virtual environment made by labkit"
            )
        shutil.rmtree(folder)  # a half-made environment from an interrupted install: start again
    steps = [
        [sys.executable, "-m", "venv", str(folder)],
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", pin],
    ]
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise RuntimeError(
                f"making AIPerf's environment failed at `{shlex.join(argv[1:])}` (exit {done.returncode}); the "
                f"folder is left without its stamp and is made again next time:\n"
                f"{_tail(done.stdout + done.stderr)}"
            )
    tmp = stamp.with_suffix(".tmp")
    tmp.write_text(pin + "\n")
    os.replace(tmp, stamp)


@dataclass
class AIPerfResult(Result):
    """One AIPerf run against an endpoint, in seconds, under AIPerf's own metric names.

    What :func:`run_aiperf` returns (notebook `serving_endpoint`). ``ttft``, ``itl`` (AIPerf's, per request: vLLM's TPOT),
    ``inter_chunk`` (every gap between streamed chunks, pooled: vLLM's ITL) and ``request_latency`` map a
    percentile (50, 90, 99) to seconds; they are empty without streaming. ``output_tokens`` is each request's
    output length as AIPerf counted it with the endpoint's tokenizer; ``request_ttft_s``, ``request_latency_s`` and
    ``request_itl_s`` each request's own, in the order AIPerf sent them. ``startup_s`` is the time from launching
    AIPerf to its first request, ``wall_s`` the whole run, ``benchmark_s`` AIPerf's own benchmark duration.
    ``command`` is the command line, as typed in AIPerf's environment.
    """

    concurrency: int
    requests: int  # requests AIPerf completed, with or without an error
    errors: int
    input_tokens: int  # asked for
    output_tokens_asked: int
    ttft: dict[float, float]
    itl: dict[float, float]
    inter_chunk: dict[float, float]
    request_latency: dict[float, float]
    output_tokens_per_s: float  # all requests together, per second of the benchmark
    output_tokens_per_s_per_user: dict[float, float]  # 1 / AIPerf's ITL, per request
    output_tokens: list[int] = field(repr=False)
    request_ttft_s: list[float] = field(repr=False)  # each request's, in the order they were sent
    request_latency_s: list[float] = field(repr=False)
    request_itl_s: list[float] = field(repr=False)
    startup_s: float
    benchmark_s: float
    wall_s: float
    command: str


def _check_url(base_url: str) -> str:
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise ValueError(
            f"base_url must be an http:// or https:// address (e.g. http://127.0.0.1:8000/v1); got {base_url!r}"
        )
    url = base_url.rstrip("/")
    return url.removesuffix("/v1")  # AIPerf adds /v1/completions itself


def _private_cache(root: Path) -> None:
    """A Hugging Face cache holding only labkit's byte-level tokenizer, under the name AIPerf is given."""
    repo = root / f"models--{TOKENIZER.replace('/', '--')}"
    snapshot = repo / "snapshots" / _SNAPSHOT
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(_SNAPSHOT)
    files = resources.files("labkit.serving") / "tokenizer"
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (snapshot / name).write_bytes((files / name).read_bytes())


def _child_env(tmp: Path) -> dict[str, str]:
    hosts = ",".join(h for h in (os.environ.get("NO_PROXY", ""), "127.0.0.1", "localhost") if h)
    inherited = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}  # not its packages
    return {
        **inherited,
        "HF_HUB_OFFLINE": "1",  # AIPerf and transformers read no network
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HOME": str(tmp / "hf"),
        "HF_HUB_CACHE": str(tmp / "hf" / "hub"),
        "TMPDIR": str(tmp),  # AIPerf leaves shared-memory folders in the temporary folder: keep them in ours
        "MPLCONFIGDIR": str(tmp / "mpl"),
        "NO_PROXY": hosts,  # a proxy set for the internet must not carry requests to this machine
        "no_proxy": hosts,
        "PYTHONUNBUFFERED": "1",
    }


def _argv(python: Path, args: list[str]) -> list[str]:
    if sys.platform.startswith("linux"):
        # AIPerf's own services die with its controller (PR_SET_PDEATHSIG); this asks the same of the controller
        # towards this process, so a crashed kernel leaves no benchmark running. Elsewhere the controller runs
        # directly and only the timeout and interrupt paths below stop it.
        boot = (
            "import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGKILL); "
            "os.getppid() == int(sys.argv[1]) or os._exit(1); "
            "os.execv(sys.executable, [sys.executable, '-m', 'aiperf', *sys.argv[2:]])"
        )
        return [str(python), "-c", boot, str(os.getpid()), *args]
    return [str(python), "-m", "aiperf", *args]


def _group_alive(pgid: int) -> bool:
    if not hasattr(os, "killpg"):  # elsewhere (Windows): no process groups; the controller alone was waited for
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process this user cannot signal: not one AIPerf started
        return False
    return True


def _stop_group(proc: subprocess.Popen, grace_s: float = 3.0, gone_s: float = 5.0) -> None:
    """Stop AIPerf and every process it started (its controller, workers, record processors): SIGTERM, ``grace_s``
    to shut down, then SIGKILL to whatever is left; reap the controller and wait (up to ``gone_s``) until the group
    is empty, so that nothing is left running when this returns."""
    if hasattr(os, "killpg"):  # POSIX; elsewhere (Windows) the else branch below stops the controller alone
        # the run has a process group of its own (start_new_session): signal all of it

        def send(sig: int) -> None:
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    else:  # elsewhere (Windows): no process groups; the controller alone is stopped, its services follow it

        def send(sig: int) -> None:
            if proc.poll() is None:
                proc.kill() if sig != signal.SIGTERM else proc.terminate()

    kill = getattr(signal, "SIGKILL", signal.SIGTERM)
    try:
        if proc.poll() is None:
            send(signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        send(kill)  # whatever is left of the group, controller gone or not
    finally:
        while proc.poll() is None:
            try:
                proc.wait()
            except KeyboardInterrupt:
                continue
        if hasattr(os, "killpg"):  # its services, orphaned now, end (and are reaped by init) within moments
            deadline = time.monotonic() + gone_s
            while _group_alive(proc.pid) and time.monotonic() < deadline:
                send(kill)
                time.sleep(0.02)


def _percentiles(summary: dict, tag: str) -> dict[float, float]:
    metric = summary.get(tag)
    if not isinstance(metric, dict):
        return {}
    scale = _UNITS.get(metric.get("unit", ""), 1.0)
    return {float(p): float(metric[f"p{p}"]) * scale for p in PERCENTILES if metric.get(f"p{p}") is not None}


def _each(records: list[dict], tag: str, scale: float | None = None) -> list[float]:
    """One metric of every request that has it (AIPerf's per-request export), in seconds unless ``scale`` says."""
    out = []
    for record in records:
        metric = record.get("metrics", {}).get(tag)
        if isinstance(metric, dict) and isinstance(metric.get("value"), (int, float)):
            unit = scale if scale is not None else _UNITS.get(metric.get("unit", ""), 1.0)
            out.append(float(metric["value"]) * unit)
    return out


def _read(art: Path) -> tuple[dict, list[dict]]:
    summary_path = art / "profile_export_aiperf.json"
    if not summary_path.is_file():
        raise FileNotFoundError(summary_path.name)
    summary = json.loads(summary_path.read_text())
    records_path = art / "profile_export.jsonl"
    records = [json.loads(line) for line in records_path.read_text().splitlines() if line.strip()]
    # the export holds the warm-up's requests too, marked with their phase: only the measured ones are kept
    measured = [r for r in records if (r.get("metadata") or {}).get("benchmark_phase", "profiling") == "profiling"]
    return summary, measured


def run_aiperf(
    base_url: str,
    model: str,
    concurrency: int,
    requests: int,
    input_tokens: int,
    output_tokens: int,
    *,
    streaming: bool = True,
    timeout_s: float = 120.0,
    endpoint: str = "completions",
    seed: int = 0,
    warmup: int = 0,
) -> AIPerfResult:
    """Run AIPerf against ``base_url`` (an OpenAI-compatible server, e.g. ``http://127.0.0.1:8000/v1``) and read
    its results. Taught in notebook `serving_endpoint`.

    ``warmup`` requests are sent first and left out of every result (AIPerf's ``--warmup-request-count``: its
    first requests meet its own processes still starting); the server sees them, before the others.
    ``concurrency`` requests are kept in flight until ``requests`` have been sent; each has a synthetic prompt of
    ``input_tokens`` tokens and asks for exactly ``output_tokens`` (``max_tokens``, with ``ignore_eos``). AIPerf
    runs from :func:`aiperf_env`'s environment as a program of its own, offline, in a private temporary folder that
    is removed afterwards; on ``timeout_s``, an interrupt or any error, it is stopped with every process it
    started. A missing environment, or AIPerf failing, raises RuntimeError with the end of AIPerf's output;
    requests the server answered with an error are counted in ``errors``, not raised.
    """
    url = _check_url(base_url)
    if not isinstance(model, str) or not model.strip():
        raise ValueError(
            f"model must be the served model's name (a non-empty string, e.g. 'labkit-tinygpt'); got {model!r}"
        )
    concurrency = checks.whole("concurrency", concurrency)
    requests = checks.whole("requests", requests)
    input_tokens = checks.whole("input_tokens", input_tokens)
    warmup = checks.whole("warmup", warmup, minimum=0)
    output_tokens = checks.whole("output_tokens", output_tokens)
    seed = checks.whole("seed", seed, minimum=0)
    timeout_s = checks.positive("timeout_s", timeout_s)
    if requests < concurrency:
        raise ValueError(
            f"requests must be at least concurrency ({concurrency}), or some slots never fill; got {requests}"
        )
    if endpoint not in ENDPOINTS:
        raise ValueError(f"endpoint must be one of {', '.join(ENDPOINTS)}; got {endpoint!r}")
    if not isinstance(streaming, bool):
        raise ValueError(f"streaming must be True or False; got {streaming!r}")
    python = aiperf_env()
    if python is None:
        raise RuntimeError(
            f"AIPerf's virtual environment is not made yet (looked in {aiperf_venv_dir()}): run `make aiperf` in the "
            f"course's folder, or labkit.serving.bench.aiperf_env(create=True) (a minute or two, once)"
        )
    args = [
        "profile", "--model", model, "--url", url, "--endpoint-type", endpoint,
        *(["--streaming"] if streaming else []),
        "--tokenizer", TOKENIZER,
        "--concurrency", str(concurrency), "--request-count", str(requests),
        "--isl", str(input_tokens), "--isl-stddev", "0", "--osl", str(output_tokens), "--osl-stddev", "0",
        "--extra-inputs", "ignore_eos:true", "--random-seed", str(seed),
        *(["--warmup-request-count", str(warmup)] if warmup else []),
        "--output-artifact-dir", "artifacts", "--ui", "none",
        "--no-server-metrics", "--no-gpu-telemetry", "--use-server-token-count",
    ]  # fmt: skip
    with owned_tempdir("aiperf") as folder:
        tmp = Path(folder)
        _private_cache(tmp / "hf" / "hub")
        log_path = tmp / "aiperf.log"
        launched_ns = time.time_ns()
        started = time.perf_counter()
        # a process group of its own, so that every process AIPerf starts can be stopped together
        group: dict[str, Any] = dict(start_new_session=True) if hasattr(os, "killpg") else {}  # elsewhere: ours
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                _argv(python, args), cwd=tmp, env=_child_env(tmp), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, **group,
            )  # fmt: skip
            try:
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _stop_group(proc)
                raise RuntimeError(
                    f"AIPerf did not finish within timeout_s={timeout_s:g} s and was stopped with every process it "
                    f"started; the end of its output:\n{_tail(log_path.read_text(errors='replace'))}"
                ) from None
            finally:
                _stop_group(proc)
        wall_s = time.perf_counter() - started
        output = log_path.read_text(errors="replace")
        if code != 0:
            raise RuntimeError(f"AIPerf failed (exit {code}); the end of its output:\n{_tail(output)}")
        try:
            summary, records = _read(tmp / "artifacts")
        except (OSError, ValueError) as exc:
            raise RuntimeError(
                f"AIPerf exited without its results ({exc}); the end of its output:\n{_tail(output)}"
            ) from None
    records.sort(key=lambda r: r.get("metadata", {}).get("request_start_ns", 0))
    starts = [r["metadata"]["request_start_ns"] for r in records if "request_start_ns" in r.get("metadata", {})]
    errors = sum(int(e.get("count", 1)) for e in summary.get("error_summary") or [])
    completed = summary.get("completed_request_count", summary.get("request_count", {})).get("avg", len(records))
    osl = [int(v) for v in _each(records, "output_sequence_length", 1.0)]
    return AIPerfResult(
        concurrency=concurrency,
        requests=int(completed),
        errors=errors,
        input_tokens=input_tokens,
        output_tokens_asked=output_tokens,
        ttft=_percentiles(summary, "time_to_first_token"),
        itl=_percentiles(summary, "inter_token_latency"),
        inter_chunk=_percentiles(summary, "inter_chunk_latency"),
        request_latency=_percentiles(summary, "request_latency"),
        output_tokens_per_s=float(summary.get("output_token_throughput", {}).get("avg", float("nan"))),
        output_tokens_per_s_per_user={
            float(p): float(v)
            for p in PERCENTILES
            if (v := summary.get("output_token_throughput_per_user", {}).get(f"p{p}")) is not None
        },
        output_tokens=osl,
        request_ttft_s=_each(records, "time_to_first_token"),
        request_latency_s=_each(records, "request_latency"),
        request_itl_s=_each(records, "inter_token_latency"),
        startup_s=(min(starts) - launched_ns) / 1e9 if starts else float("nan"),
        benchmark_s=float(summary.get("benchmark_duration", {}).get("avg", float("nan"))),
        wall_s=wall_s,
        command=shlex.join(["aiperf", *args]),
    )
