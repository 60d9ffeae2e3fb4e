"""labkit.serving.bench: NVIDIA AIPerf against labkit's OpenAI-compatible endpoint (notebook `serving_endpoint`).

The tests that run AIPerf need its virtual environment (``make aiperf``); they skip where it is missing, unless
``LABKIT_REQUIRE_AIPERF=1`` (CI sets it after making the environment), which makes a missing one a failure.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from labkit.core import environment
from labkit.serving import bench
from labkit.serving.engine import Engine
from labkit.serving.kv_cache import PagedKVCache
from labkit.serving.live import LiveEngine
from labkit.serving.metrics import SLO, serving_metrics
from labkit.serving.openai_api import serve
from labkit.workloads.models import TinyGPT

TOKENIZER = Path(bench.__file__).parent / "tokenizer"
MODEL = "labkit-tinygpt"


def _byte_chars() -> dict[int, str]:
    """GPT-2's table from byte to printable character (what the ByteLevel pre-tokenizer writes)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + i) for i, b in enumerate(others)}}


def test_the_tokenizer_gives_each_byte_its_own_id_and_nothing_else():
    spec = json.loads((TOKENIZER / "tokenizer.json").read_text())
    chars = _byte_chars()
    assert spec["model"]["type"] == "BPE" and spec["model"]["merges"] == []
    assert spec["model"]["vocab"] == {chars[b]: b for b in range(256)}
    assert spec["added_tokens"] == [] and spec["normalizer"] is None and spec["post_processor"] is None
    assert spec["pre_tokenizer"] == {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                     "use_regex": False}  # fmt: skip
    assert spec["decoder"]["type"] == "ByteLevel"
    config = json.loads((TOKENIZER / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_bad_arguments_say_what_is_allowed():
    good = dict(base_url="http://127.0.0.1:8000/v1", model=MODEL, concurrency=2, requests=4, input_tokens=8,
                output_tokens=4)  # fmt: skip
    for change, words in [
        ({"base_url": "127.0.0.1:8000"}, "http:// or https://"),
        ({"model": ""}, "model must be"),
        ({"concurrency": 0}, "concurrency must be a whole number, 1 or more"),
        ({"requests": 1}, "requests must be at least concurrency"),
        ({"input_tokens": 2.5}, "input_tokens must be a whole number"),
        ({"output_tokens": True}, "output_tokens must be a whole number"),
        ({"warmup": -1}, "warmup must be a whole number, 0 or more"),
    ]:
        with pytest.raises(ValueError, match=words):
            bench.run_aiperf(**{**good, **change})
    with pytest.raises(ValueError, match="timeout_s"):
        bench.run_aiperf(**good, timeout_s=0)
    with pytest.raises(ValueError, match="endpoint must be one of completions, chat"):
        bench.run_aiperf(**good, endpoint="embeddings")


def test_only_a_finished_environment_is_used_and_no_other_folder_is_removed(tmp_path, monkeypatch):
    folder = tmp_path / "aiperf"
    monkeypatch.setenv(bench.VENV_ENV, str(folder))
    assert bench.aiperf_venv_dir() == folder and bench.aiperf_env() is None
    python = folder / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert bench.aiperf_env() is None  # no stamp: half made
    (folder / bench.STAMP).write_text("aiperf==0.0.1\n")
    assert bench.aiperf_env() is None  # another version's
    (folder / bench.STAMP).write_text(f"aiperf=={bench.AIPERF_VERSION}\n")
    assert bench.aiperf_env() == python
    (folder / bench.STAMP).unlink()
    with pytest.raises(ValueError, match="not a virtual environment"):
        bench.aiperf_env(create=True)
    assert python.exists()  # left as it was


@pytest.fixture(scope="module")
def aiperf_python() -> Path:
    python = bench.aiperf_env()
    if python is None:
        reason = f"AIPerf's virtual environment is not made ({bench.aiperf_venv_dir()}): run `make aiperf`"
        if environment.get("LABKIT_REQUIRE_AIPERF"):
            pytest.fail(reason + ", and LABKIT_REQUIRE_AIPERF is set")
        pytest.skip(reason)
    return python


@pytest.fixture(scope="module")
def endpoint(aiperf_python):
    torch.manual_seed(0)
    model = TinyGPT()
    engine = Engine(model, PagedKVCache(model, num_blocks=64, block_size=16), max_batch=8)
    with LiveEngine(engine) as live, serve(live, MODEL) as url:
        yield live, url


def _ordered(percentiles: dict[float, float], above: float | None) -> bool:
    """p50 <= p90 <= p99, all at least 0, and p50 above ``above`` where given."""
    p50, p90, p99 = (percentiles[p] for p in (50, 90, 99))
    return 0 <= p50 <= p90 <= p99 and (above is None or p50 > above)


@pytest.mark.processes
@pytest.mark.parametrize(("concurrency", "requests"), [(4, 10)])  # one run: AIPerf takes seconds to start
def test_aiperf_runs_offline_and_sees_no_less_time_than_the_server_itself(endpoint, concurrency, requests):
    """Every request AIPerf times contains the server's own record of it: sent before the server stamps its
    arrival, its first chunk and its end received after the server made them. So, request for request, AIPerf's
    TTFT and latency are at least the server's, and so is every order statistic of them (sorted lists)."""
    live, url = endpoint
    live.take_run()  # nothing before this run
    result = bench.run_aiperf(url, MODEL, concurrency, requests, input_tokens=24, output_tokens=12, timeout_s=90,
                              warmup=2)  # fmt: skip
    run = live.take_run()
    run.records = sorted(run.records, key=lambda r: r.arrival_s)[2:]  # the warm-up's requests come first
    assert result.errors == 0 and result.requests == requests
    assert result.output_tokens == [12] * requests
    assert len(run.records) == requests and all(r.ok for r in run.records)
    assert {r.prompt_len for r in run.records} == {24}  # AIPerf's prompts, made with the tokenizer: 24 bytes each
    for metric in (result.ttft, result.request_latency):
        assert _ordered(metric, above=0.0), metric
    for metric in (result.itl, result.inter_chunk):  # chunks the server could only send together (its thread
        assert _ordered(metric, above=None), metric  # kept off a busy core) arrive together: 0 s is possible
    server_ttft = sorted(r.ttft_s for r in run.records)
    server_e2e = sorted(r.e2e_s for r in run.records)
    assert all(c >= s for c, s in zip(sorted(result.request_ttft_s), server_ttft, strict=True))
    assert all(c >= s for c, s in zip(sorted(result.request_latency_s), server_e2e, strict=True))
    own = serving_metrics(run, SLO(ttft_s=1.0, tpot_s=1.0))
    assert own.completed == requests
    print(f"c={concurrency}: TTFT p50 AIPerf/server {result.ttft[50] / own.ttft[50]:.2f} "
          f"(+{1e3 * (result.ttft[50] - own.ttft[50]):.1f} ms); AIPerf ITL / server TPOT p50 "
          f"{result.itl[50] / own.tpot[50]:.2f}; start-up {result.startup_s:.1f} s, wall {result.wall_s:.1f} s")  # fmt: skip
    assert "--tokenizer labkit/byte-level" in result.command and result.command.startswith("aiperf profile ")


@pytest.mark.processes
def test_a_run_past_its_timeout_is_stopped_with_every_process_it_started(endpoint, monkeypatch):
    psutil = pytest.importorskip("psutil")
    live, url = endpoint
    started: list[subprocess.Popen] = []
    real = subprocess.Popen

    class Recorded(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)
            self.folder = kwargs["cwd"]

    monkeypatch.setattr(bench.subprocess, "Popen", Recorded)
    with pytest.raises(RuntimeError, match="did not finish within timeout_s=5 s and was stopped"):
        bench.run_aiperf(url, MODEL, 2, 100_000, input_tokens=8, output_tokens=4, timeout_s=5)
    live.take_run()
    (proc,) = started
    folder = str(proc.folder)
    assert proc.returncode is not None and not os.path.exists(folder)
    left = []
    for p in psutil.process_iter(["pid", "cwd", "environ"]):
        try:
            group = os.getpgid(p.pid) if hasattr(os, "getpgid") else None
        except OSError:
            continue
        env = p.info.get("environ") or {}
        if group == proc.pid or env.get("TMPDIR") == folder or (p.info.get("cwd") or "") == folder:
            left.append(p.info)
    assert not left, left
    assert not [n for n in os.listdir(tempfile.gettempdir()) if n.startswith(f"labkit-aiperf-{os.getpid()}-")]
