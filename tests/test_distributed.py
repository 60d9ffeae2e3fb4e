"""labkit.parallel.distributed: real worker processes, real gloo collectives, and failures that end cleanly."""

import os
import signal
import threading
import time

import psutil
import pytest

from labkit.core import errors, procs
from labkit.parallel import ddp_workers
from labkit.parallel import distributed as dist
from labkit.predict import comm_model


def _children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if p.is_running() and p.status() != "zombie"]


def _port_is_free(port: int) -> bool:
    return not procs.port_in_use(port)


@pytest.fixture
def no_leftovers():
    """The run leaves no worker process behind (checked after the test body)."""
    before = {p.pid for p in _children()}
    yield
    left = [p for p in _children() if p.pid not in before]
    assert not left, f"processes left behind: {[(p.pid, p.cmdline()) for p in left]}"


@pytest.fixture
def store_ports(monkeypatch):
    """Record the port of every rendezvous store the launcher opens."""
    ports = []
    real = dist.dist.TCPStore

    def recording(*args, **kwargs):
        store = real(*args, **kwargs)
        ports.append(store.port)
        return store

    monkeypatch.setattr(dist.dist, "TCPStore", recording)
    return ports


@pytest.mark.processes
def test_allreduce_sums_exactly_across_two_processes(no_leftovers, store_ports):
    results = dist.launch(ddp_workers.allreduce_check, 2, numel=4096, backend="gloo", timeout_s=60)
    assert [r["rank"] for r in results] == [0, 1]
    assert all(r["correct"] and r["expected"] == 3.0 for r in results)
    assert _port_is_free(store_ports[0]), "the rendezvous port is released after the run"


@pytest.mark.processes
def test_allreduce_benchmark_reports_nccl_tests_quantities(no_leftovers):
    rows = dist.launch(ddp_workers.allreduce_benchmark, 2, sizes_bytes=[4096, 1 << 20], backend="gloo", timeout_s=60)
    for rank_rows in rows:
        assert [r["bytes"] for r in rank_rows] == [4096, 1 << 20]
        for r in rank_rows:
            assert r["correct"]
            assert r["algbw"] == pytest.approx(r["bytes"] / r["seconds"])
            assert r["busbw"] == pytest.approx(r["algbw"] * 2 * (2 - 1) / 2)  # 2(n-1)/n with n = 2
    assert rows[0][1]["seconds"] == rows[1][1]["seconds"], "every rank reports the slowest rank's time"


@pytest.mark.processes
@pytest.mark.parametrize(
    "mode, expected",
    [("raise", r"rank 1 of 2 exited with code 1 .*RuntimeError: rank 1 failed on purpose"), ("kill", "SIGKILL")],
)
def test_a_failing_worker_ends_the_run_quickly_and_cleanly(mode, expected, no_leftovers, store_ports):
    start = time.monotonic()
    with pytest.raises(errors.DistributedRunError, match=expected):
        dist.launch(
            ddp_workers.faulty_worker, 2, fail_rank=1, mode=mode, at_step=3, steps=400, backend="gloo", timeout_s=60
        )
    assert time.monotonic() - start < 30
    assert _port_is_free(store_ports[0])


@pytest.mark.processes
def test_a_hanging_worker_ends_the_run_when_the_collective_times_out(no_leftovers, store_ports):
    # Rank 1 never reaches the all-reduce rank 0 waits in; rank 0's collective times out and the run ends.
    assert dist.DEFAULT_COLLECTIVE_TIMEOUT_S <= 25, "with the defaults, a hang must end the run within 30 s"
    start = time.monotonic()
    with pytest.raises(errors.DistributedRunError, match=r"rank 0 .*Timed out.*rank\(s\) \[1\] never joined"):
        dist.launch(ddp_workers.faulty_worker, 2, fail_rank=1, mode="hang", backend="gloo", collective_timeout_s=4)
    assert time.monotonic() - start < 4 + 15
    assert _port_is_free(store_ports[0])


@pytest.mark.processes
def test_a_run_past_its_deadline_is_stopped(no_leftovers):
    # One rank sleeping outside any collective: only the run's own deadline can catch it.
    start = time.monotonic()
    with pytest.raises(errors.DistributedRunError, match=r"ranks \[0\] of 1 were still running after timeout_s=5"):
        dist.launch(ddp_workers.faulty_worker, 1, fail_rank=0, mode="hang", backend="gloo", timeout_s=5)
    assert 5 <= time.monotonic() - start < 5 + 10


@pytest.mark.processes
def test_a_worker_killed_from_outside_mid_run_fails_cleanly(no_leftovers):
    # An operator (or the OOM killer) kills one worker while the collectives are running.
    outcome = {}

    def run():
        try:
            outcome["result"] = dist.launch(
                ddp_workers.faulty_worker,
                2,
                fail_rank=0,
                mode="none",
                at_step=0,
                steps=2000,
                backend="gloo",
                timeout_s=60,
            )
        except errors.DistributedRunError as err:
            outcome["error"] = err

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 30
    victim = None
    while victim is None and time.monotonic() < deadline:
        workers = [p for p in _children() if "labkit.parallel.distributed" in " ".join(p.cmdline())]
        if len(workers) == 2 and all(p.cpu_times().user > 0.5 for p in workers):  # past start-up, in the loop
            victim = workers[1]
        time.sleep(0.2)
    assert victim is not None, "the workers never started"
    killed_at = time.monotonic()
    os.kill(victim.pid, signal.SIGKILL)
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert "SIGKILL" in str(outcome.get("error")), outcome
    assert time.monotonic() - killed_at < 30


@pytest.mark.processes
def test_two_runs_at_once_get_their_own_ports(no_leftovers, store_ports):
    results = {}

    def run(name):
        results[name] = dist.launch(ddp_workers.allreduce_check, 2, numel=1024, backend="gloo", timeout_s=60)

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert all(r["correct"] for n in ("a", "b") for r in results[n])
    assert len(set(store_ports)) == 2


def test_bad_input_is_refused_with_what_is_allowed():
    with pytest.raises(ValueError, match="world_size must be a positive integer"):
        dist.launch(ddp_workers.allreduce_check, 0)
    with pytest.raises(ValueError, match="unknown backend 'mpi'; allowed: auto, gloo, nccl"):
        dist.launch(ddp_workers.allreduce_check, 2, backend="mpi")
    with pytest.raises(ValueError, match="must be defined at the top level of an importable module"):
        dist.launch(lambda ctx: None, 2)
    with pytest.raises(ValueError, match="collective_timeout_s must be a positive number of seconds"):
        dist.launch(ddp_workers.allreduce_check, 2, collective_timeout_s=0)
    with pytest.raises(TypeError, match=r"allreduce_check cannot take the worker arguments \['size'\]"):
        dist.launch(ddp_workers.allreduce_check, 2, size=4096)  # a misspelt argument, refused before any process starts
    with pytest.raises(TypeError, match="positional"):
        dist.launch(ddp_workers.allreduce_check, 2, 4096)  # worker arguments go by name only
    with pytest.raises(ValueError, match="unknown mode"):
        ddp_workers.faulty_worker(None, mode="explode")
    if not dist.torch.cuda.is_available():
        with pytest.raises(ValueError, match="needs one CUDA GPU per rank"):
            dist.resolve_backend("nccl", 2)
        assert dist.resolve_backend("auto", 2) == "gloo"


def test_ring_allreduce_model_matches_the_formula():
    link = comm_model.Link("test", bandwidth=1e9, latency_s=1e-5)
    assert link.allreduce_s(1, 1e9) == 0.0
    # n = 4: 2·3 = 6 latency steps, and each rank moves 2·3/4 of the buffer
    assert link.allreduce_s(4, 1e9) == pytest.approx(6e-5 + 1.5)
    with pytest.raises(ValueError):
        link.allreduce_s(0, 1)


def test_servers_all_reduce_inside_then_across():
    fast, slow = (
        comm_model.Link("fast", bandwidth=100e9, latency_s=0.0),
        comm_model.Link("slow", bandwidth=10e9, latency_s=0.0),
    )
    servers = comm_model.NodeLinks("2 x 4", fast, slow, per_node=4)
    assert servers.allreduce_s(4, 4e9) == fast.allreduce_s(4, 4e9)  # one server: the fast ring alone
    # 8 GPUs = 2 servers: inside, 2·3/4 · 4 GB at 100 GB/s = 0.06 s; across, each GPU's 1 GB share over a
    # 2-server ring, 2·1/2 · 1 GB at 10 GB/s = 0.1 s
    assert servers.allreduce_s(8, 4e9) == pytest.approx(0.06 + 0.1)
    assert servers.allreduce_s(8, 4e9) < slow.allreduce_s(8, 4e9) / 2  # far better than a flat ring on the slow link
    with pytest.raises(ValueError, match="do not fill servers of 4"):
        servers.allreduce_s(6, 1e9)


def test_fit_link_recovers_latency_and_bandwidth():
    link = comm_model.Link("truth", bandwidth=2e9, latency_s=3e-5)
    sizes = [1e3, 1e5, 1e6, 1e7, 1e8]
    fitted = comm_model.fit_link(sizes, [link.allreduce_s(2, s) for s in sizes], n_ranks=2)
    assert fitted.bandwidth == pytest.approx(2e9, rel=1e-6)
    assert fitted.latency_s == pytest.approx(3e-5, rel=1e-6)


def test_scaling_model_efficiency_falls_as_communication_grows():
    link = comm_model.Link("test", bandwidth=10e9, latency_s=1e-5)
    one = comm_model.predict_data_parallel(1, compute_s=1.0, grad_bytes=4e9, link=link)
    assert one["efficiency"] == pytest.approx(1.0) and one["comm_s"] == 0
    # 8 GPUs, strong scaling: 1/8 s of compute plus 2·7/8·4e9/10e9 = 0.7 s of all-reduce (+ 14 latencies)
    eight = comm_model.predict_data_parallel(8, compute_s=1.0, grad_bytes=4e9, link=link)
    assert eight["step_s"] == pytest.approx(0.125 + 0.7 + 14e-5)
    assert eight["speedup"] == pytest.approx(1.0 / eight["step_s"])
    shares, effs = [], []
    for n in (1, 2, 4, 8, 16, 64):
        p = comm_model.predict_data_parallel(n, compute_s=1.0, grad_bytes=4e8, link=link, overlap=0.5)
        shares.append(p["comm_share"])
        effs.append(p["efficiency"])
    assert shares == sorted(shares) and effs == sorted(effs, reverse=True)
    # weak scaling with perfect overlap and a fast link: nearly ideal
    weak = comm_model.predict_data_parallel(8, compute_s=1.0, grad_bytes=1e6, link=link, overlap=1.0, scaling="weak")
    assert weak["efficiency"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="scaling must be"):
        comm_model.predict_data_parallel(2, 1.0, 1.0, link, scaling="diagonal")


@pytest.mark.processes
def test_the_same_worker_runs_under_torchrun(no_leftovers):
    """The standard launcher runs labkit's workers unchanged (env:// rendezvous)."""
    import subprocess
    import sys

    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo" if sys.platform.startswith("linux") else "lo0")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "labkit.parallel.distributed", "labkit.parallel.ddp_workers:allreduce_check"]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    for rank in (0, 1):
        assert f"rank {rank}: {{'rank': {rank}, 'expected': 3.0, 'correct': True" in run.stdout


def _listening(process: psutil.Process) -> list[str]:
    """The addresses ``process`` listens on (TCP), as "ip:port"."""
    return [
        f"{c.laddr.ip}:{c.laddr.port}" for c in process.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN
    ]


@pytest.mark.processes
def test_nothing_the_launcher_starts_listens_beyond_loopback(no_leftovers):
    """The rendezvous store and gloo's sockets are reachable from this machine only (a classroom network is open).

    Read while the workers run: the launcher's store, and each worker's own listening sockets, all on 127.0.0.1.
    """
    outcome = {}

    def run():
        outcome["result"] = dist.launch(
            ddp_workers.faulty_worker, 2, mode="none", steps=400, backend="gloo", timeout_s=60
        )

    thread = threading.Thread(target=run)
    thread.start()
    seen: dict[str, list[str]] = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (len(seen) == 3 and all(seen.values())):
        workers = [p for p in _children() if "labkit.parallel.distributed" in " ".join(p.cmdline())]
        if len(workers) == 2 and all(p.cpu_times().user > 0.3 for p in workers):  # past init_process_group
            try:
                seen = {"launcher": _listening(psutil.Process())} | {f"worker {p.pid}": _listening(p) for p in workers}
            except psutil.NoSuchProcess:
                break
        time.sleep(0.1)
    thread.join(timeout=60)
    assert outcome.get("result") == [400, 400]
    assert seen.get("launcher"), f"the store's listening socket was never seen: {seen}"
    beyond = {who: [a for a in addrs if not a.startswith("127.")] for who, addrs in seen.items()}
    assert not any(beyond.values()), f"listening beyond the loopback interface: {beyond}"


def test_the_rendezvous_store_listens_on_loopback_only():
    store = dist.loopback_store(timeout_s=5)
    try:
        on_port = [a for a in _listening(psutil.Process()) if a.rsplit(":", 1)[1] == str(store.port)]
        assert on_port == [f"127.0.0.1:{store.port}"]
    finally:
        del store


@pytest.mark.processes
def test_a_worker_that_exits_cleanly_without_a_result_is_a_clear_error(no_leftovers):
    with pytest.raises(errors.DistributedRunError, match=r"ranks \[0\] of 1 exited with code 0 but returned no result"):
        dist.launch(ddp_workers.faulty_worker, 1, fail_rank=0, mode="exit", at_step=0, backend="gloo", timeout_s=60)
