"""The Ray backend: the same matrices as the local executor, on one node and on two, and what
happens when a node goes away mid-run.

One simulated cluster (``ray.cluster_utils.Cluster``: a head and, when a test needs it, a worker
node, both on this machine, bound to 127.0.0.1, no dashboard, each with 2 CPUs and the resource
``coevo_sandbox``) serves the whole module. Executors are opened one at a time: each holds every
node's ``coevo_sandbox`` unit while it lives.
"""

from __future__ import annotations

import _thread
import importlib.util
import logging
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster

import coevo_code.version
from coevo_code.execution import Executor
from coevo_code.execution.backends import ExecutorProtocol, make_executor
from coevo_code.execution.ray import (
    INSTALL_HINT, RESOURCE, RayBackendError, RayExecutor, RayMissingError, doctor_report,
    init_ray)

pytestmark = pytest.mark.slow  # a simulated Ray cluster of several nodes, started per module

HERE = Path(__file__).resolve().parent
NODE = {"num_cpus": 2, "resources": {RESOURCE: 1}, "node_ip_address": "127.0.0.1"}


def _load(name: str):
    """Another test module's tables, loaded from its file (tests/ is not a package)."""
    if str(HERE) not in sys.path:  # test_hostile imports conftest
        sys.path.insert(0, str(HERE))
    spec = importlib.util.spec_from_file_location(f"_coevo_ray_{name}", HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


verdicts = _load("test_verdicts")
hostile = _load("test_hostile")

# Hostile programs left out of the comparison:
# - kill_everything: os.kill(-1) from a cell. On this one-machine simulation both "nodes" run
#   slots with the same slot uids on the same host, so where no pid namespace separates them
#   (the direct launcher) a cell of one node could kill the other node's cells: its verdict, and
#   its neighbours', would depend on what happens to run at the same time. (test_hostile.py
#   runs it alone.)
# The loops (infinite_loop, ignore_sigterm) stay: their timeout is decided on CPU time, far from
# the limit. The programs that need host fixtures get them here (a directory, a listener, the
# repository path) and their aims are checked after the run.
HOSTILE_LEFT_OUT = {"kill_everything"}


# ---- the cluster ---------------------------------------------------------------------------------
class SimCluster:
    def __init__(self):
        self.cluster = Cluster(initialize_head=True,
                               head_node_args={**NODE, "include_dashboard": False})
        self.worker = None

    @property
    def address(self) -> str:
        return self.cluster.address

    def nodes(self, k: int) -> None:
        """Make the cluster have k nodes (1 or 2) with the sandbox resource."""
        if k == 2 and self.worker is None:
            self.worker = self.cluster.add_node(**NODE)
            self.cluster.wait_for_nodes()
        elif k == 1 and self.worker is not None:
            self.cluster.remove_node(self.worker)
            self.worker = None
            _wait_dead(1)

    def connect(self) -> None:
        if not ray.is_initialized():
            init_ray(ray, self.address, None)


def _wait_dead(alive: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ray.is_initialized() and sum(n["Alive"] for n in ray.nodes()) <= alive:
            return
        if not ray.is_initialized():
            return
        time.sleep(0.2)


@pytest.fixture(scope="module")
def sim():
    c = SimCluster()
    try:
        c.connect()
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.cluster.shutdown()


# ---- workloads -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    """The host fixtures the hostile programs aim at."""
    d = tmp_path_factory.mktemp("ray") / "precious"
    d.mkdir()
    (d / "keep.txt").write_text("keep me")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    yield {"dir": d, "port": listener.getsockname()[1], "listener": listener}
    listener.close()


def workload(fx) -> list[dict]:
    """test_verdicts.py's and test_hostile.py's programs, as a few multi-program jobs, with
    outputs; plus a checker job, a functional job and an empty one."""
    v = verdicts
    correct = [p for k, p in v.CORRECT.items() if k != "iterate_stdin"]
    failing = [p for p, _ in v.FAILING.values()]
    hostile_progs = [t.format(dir=fx["dir"], port=fx["port"], repo=hostile.REPO)
                     for k, (t, _) in hostile.HOSTILE.items() if k not in HOSTILE_LEFT_OUT]
    pwned = [{"input": "", "output": "pwned\n"}]
    return [
        {"id": "verdicts", "programs": correct + failing, "tests": v.A_PLUS_B,
         "return_outputs": True},
        {"id": "iterate", "programs": [v.CORRECT["iterate_stdin"]], "tests": v.A_PLUS_B[:1]},
        {"id": "checker", "checker": v.CHECKER,
         "programs": ["n = int(input())\nprint(0, n)", "n = int(input())\nprint(n, 1)",
                      "print('x y')"],
         "tests": [{"input": "5\n", "output": "2 3\n"}, {"input": "7\n", "output": "0 7\n"}]},
        {"id": "functional", "kind": "functional", "entry_point": "add",
         "setup": "import math\nOFFSET = 0",
         "programs": ["def add(a, b):\n    return a + b + OFFSET",
                      "def add(a, b):\n    return a * b",
                      "def add(a, b):\n    raise ValueError('no')", "x = (", ""],
         "tests": [{"code": "assert add(1, 2) == 3"}, {"code": "assert add(2, 2) == 4"},
                   {"code": "add(0.1, 0.2)"}],
         "return_outputs": True},
        {"id": "hostile", "programs": hostile_progs, "tests": pwned, "return_outputs": True},
        {"id": "benign", "programs": list(hostile.BENIGN.values()), "tests": pwned},
        {"id": "empty", "programs": ["print(1)"], "tests": []},
        {"id": "cpp", "language": "cpp", "tests": v.A_PLUS_B, "return_outputs": True,
         "programs": [CPP_SUM.format(op="+"), CPP_SUM.format(op="-"), "int main( {"]},
    ]


CPP_SUM = '#include <cstdio>\nint main(){{long long a,b; scanf("%lld %lld",&a,&b); ' \
          'printf("%lld\\n",a{op}b);}}'


def _strip(results: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in results]


@pytest.fixture(scope="module")
def local_results(fixtures):
    with Executor(slots=2) as ex:
        return _strip(ex.run(workload(fixtures)))


def _assert_aims_missed(fx, results) -> None:
    d = fx["dir"]
    assert d.is_dir() and (d / "keep.txt").read_text() == "keep me"
    assert not (d / "evil.txt").exists()
    with pytest.raises(BlockingIOError):
        conn, _ = fx["listener"].accept()
        conn.close()
    out = "".join(o for row in results[4]["outputs"] for o in row)
    assert hostile.SECRET not in out and "coevo-code" not in out


def _check_same(local, got) -> None:
    assert [r["id"] for r in got] == [r["id"] for r in local]
    for a, b in zip(local, got):
        assert a == b, f"job {a['id']}: local {a} != ray {b}"


# ---- 1. the same matrices as the local backend ---------------------------------------------------
def test_local_workload_is_what_the_tables_say(local_results):
    """The reference itself: every table's expected outcome (so that 'same as local' means
    'right')."""
    by = {r["id"]: r for r in local_results}
    v = verdicts
    n_ok = len(v.CORRECT) - 1
    assert by["verdicts"]["outcomes"][:n_ok] == [["ok"] * 3] * n_ok
    assert by["verdicts"]["outcomes"][n_ok:] == [[o] * 3 for _, o in v.FAILING.values()]
    expected = [o for k, (_, o) in hostile.HOSTILE.items() if k not in HOSTILE_LEFT_OUT]
    assert [row[0] for row in by["hostile"]["outcomes"]] == expected
    assert by["benign"]["outcomes"] == [["ok"]] * len(hostile.BENIGN)
    assert by["empty"]["outcomes"] == [[]]
    n = len(v.A_PLUS_B)  # C++ through the native zygote: the same matrix on a Ray node
    assert by["cpp"]["outcomes"] == [["ok"] * n, ["wrong_answer"] * n, ["compile_error"] * n]


def test_one_node_gives_the_local_matrices(sim, fixtures, local_results):
    sim.nodes(1)
    with RayExecutor(address=sim.address, slots=2) as ex:
        assert len(ex.isolation["nodes"]) == 1
        assert ex.isolation["slots"] == 2
        got = ex.run(workload(fixtures))
        _check_same(local_results, _strip(got))
        _assert_aims_missed(fixtures, got)
        st = ex.stats()
        assert st["cells"] > 0 and st["driver_cpu_s_per_cell"] > 0


def test_two_nodes_give_the_local_matrices_and_share_the_work(sim, fixtures, local_results):
    sim.nodes(2)
    with RayExecutor(address=sim.address, slots=2) as ex:
        rep = ex.isolation
        assert len(rep["nodes"]) == 2 and rep["slots"] == 4
        assert len({n["node_id"] for n in rep["nodes"]}) == 2
        assert all(n["layers"] and n["launcher"] for n in rep["nodes"])
        got = ex.run(workload(fixtures))
        _check_same(local_results, _strip(got))
        _assert_aims_missed(fixtures, got)
        per = ex.stats()["nodes"]
        assert len(per) == 2 and all(p["cells"] > 0 for p in per), per


DOUBLE = "print(int(input()) * 2)"
RANDOM = "import os\nprint(os.urandom(4).hex())"
SEEDED = {"id": "seeded", "programs": ["import random\nprint(random.randrange(10 ** 9))"],
          "tests": [{"input": "", "output": "?"}] * 3, "return_outputs": True}
REPEATED = [
    {"id": "k-samples", "programs": [DOUBLE, "print(input())", DOUBLE, RANDOM, DOUBLE, RANDOM],
     "tests": [{"input": f"{i}\n", "output": f"{2 * i}\n"} for i in range(5)],
     "return_outputs": True},
    {"id": "functional", "kind": "functional", "entry_point": "f",
     "programs": ["def f(x):\n    return x + 1"] * 3 + ["def f(x):\n    return x"],
     "tests": [{"code": "assert f(1) == 2"}, {"code": "assert f(2) == 3"}]},
    {"id": "one", "programs": ["print(1)"] * 4, "tests": [{"input": "", "output": "1"}]},
]


def test_repeated_programs_run_once_on_both_backends(sim):
    """The core's de-duplication on both backends: the same matrices and the same cells run
    (stats()["cells"], the servers' fork counters) for jobs whose programs repeat, and a
    random program's copies share its first copy's outputs, drawn from the job's seed on both."""
    sim.nodes(1)
    progress: dict = {"local": [], "ray": []}
    with Executor(slots=2) as local:
        want = local.run(REPEATED, progress=progress["local"].append)
        local_cells = local.stats()["cells"]
        want_seeded = local.run([SEEDED])
    with RayExecutor(address=sim.address, slots=2) as ex:
        got = ex.run(REPEATED, progress=progress["ray"].append)
        ray_cells = ex.stats()["cells"]
        got_seeded = ex.run([SEEDED])
    # random draws from the job's seed (its id) on either backend: the same numbers
    assert got_seeded[0]["outputs"] == want_seeded[0]["outputs"]
    assert len({o for row in want_seeded[0]["outputs"] for o in row}) == 1
    distinct = 3 * 5 + 2 * 2 + 1 * 1  # texts x tests
    assert local_cells == ray_cells == distinct
    assert sum(progress["local"]) == sum(progress["ray"]) == 6 * 5 + 4 * 2 + 4 * 1
    k = got[0]["outputs"]
    assert k[5] == k[3] and len(set(k[3])) == 5  # copies share the first copy's outputs
    for res in (want, got):
        res[0]["outputs"][3] = res[0]["outputs"][5] = None  # os.urandom: differs by design
    assert _strip(got) == _strip(want)
    assert got[0]["outcomes"][:3] == [["ok"] * 5, ["ok"] + ["wrong_answer"] * 4, ["ok"] * 5]
    assert got[1]["passed"] == [[True, True]] * 3 + [[False, False]]


# ---- 2. a node lost mid-run ----------------------------------------------------------------------
SLOW_OK = "import time\ntime.sleep(0.2)\nprint(input())"
SLOW_WRONG = "import time\ntime.sleep(0.2)\nprint(input() + '!')"


@pytest.mark.parametrize("how", ["removed", "killed", "frozen"])
def test_a_node_lost_mid_run_loses_no_cell(sim, caplog, how):
    """removed: ``Cluster.remove_node`` (graceful, as a drained node); killed: its processes
    SIGKILLed (a crash); frozen: its actor SIGSTOPped, so that only the pings notice."""
    import os
    import signal

    sim.nodes(2)
    tests = [{"input": f"{i}\n", "output": f"{i}\n"} for i in range(10)]
    # 160 cells of 0.2 s on 4 slots: about 8 s (distinct texts: repeated ones would run once)
    progs = [f"{p}\n# {i}" for i in range(8) for p in (SLOW_OK, SLOW_WRONG)]
    job = {"id": "slow", "programs": progs, "tests": tests, "time_limit_s": 1.0}
    done = []
    # only pings can notice a frozen actor: a short timeout there (pings after 1/3 of it)
    timeout = 5.0 if how == "frozen" else 30.0
    with RayExecutor(address=sim.address, slots=2, node_timeout_s=timeout) as ex:
        assert len(ex.isolation["nodes"]) == 2
        head = ray.get_runtime_context().get_node_id()
        victim = next(n for n in ex.isolation["nodes"] if n["node_id"] != head)

        def lose():
            time.sleep(2.0)
            if how == "frozen":
                os.kill(victim["actor_pid"], signal.SIGSTOP)
            else:
                sim.cluster.remove_node(sim.worker, allow_graceful=how == "removed")
                sim.worker = None

        th = threading.Thread(target=lose)
        caplog.set_level(logging.WARNING, logger="coevo_code.execution.ray")
        t0 = time.monotonic()
        th.start()
        res = ex.run([job], progress=done.append)[0]
        took = time.monotonic() - t0
        th.join()
        assert res["outcomes"] == [["ok"] * 10, ["wrong_answer"] * 10] * 8
        assert sum(done) == 160  # each unit written once: no cell lost, none twice
        st = ex.stats()
        assert st["nodes_lost"] == 1 and [n["node_id"] for n in st["nodes"]] == [head]
        lost = [r.getMessage() for r in caplog.records if " lost: " in r.getMessage()]
        assert len(lost) == 1 and "0 unit(s)" not in lost[0], lost
        if how == "frozen":
            assert "no answer" in lost[0]
        assert took < 60, took
        assert len(ex.isolation["nodes"]) == 1
        # the survivor keeps working
        again = ex.run([{"programs": ["print(input())"], "tests": tests[:3]}])[0]
        assert again["outcomes"] == [["ok"] * 3]
    if how == "killed":  # until Ray's health checks give the node up, it still looks alive
        _wait_dead(1, timeout=120)
    # a killed actor could not remove its (empty) sandbox dir; on a real cluster it was on the
    # machine that went away, here it is on this one
    shutil.rmtree(victim["sandbox_dir"], ignore_errors=True)


# ---- 3. errors, progress, versions, Ctrl-C -------------------------------------------------------
def test_malformed_jobs_and_progress(sim):
    sim.nodes(1)
    jobs = [{"id": "a", "programs": ["print(input())"], "tests": [{"input": "1", "output": "1"}]},
            {"id": "b", "programs": "print(1)"},
            "not a job",
            {"id": "c", "kind": "functional", "programs": ["def f(): return 1"],
             "tests": [{"input": "x"}]},
            {"id": "d", "time_limit_s": -1, "programs": [], "tests": []},
            {"id": "e", "programs": ["print(2)"] * 3, "tests": [{"input": "", "output": "2"}] * 7}]
    with Executor(slots=1) as local:
        want = local.run(jobs)
    done = []
    with RayExecutor(address=sim.address, slots=2) as ex:
        got = ex.run(jobs, progress=done.append)
    assert _strip(got) == _strip(want)
    assert [("error" in r) for r in got] == [False, True, True, True, True, False]
    assert sum(done) == 1 + 21 and len(done) >= 2


def test_a_version_mismatch_is_refused(sim, monkeypatch):
    sim.nodes(1)
    monkeypatch.setattr(coevo_code.version, "__version__", "0.0.0+driver")
    with pytest.raises(RayBackendError, match=r"0\.0\.0\+driver on the driver: install the same "
                                              r"version on every node"):
        RayExecutor(address=sim.address, slots=1)


def test_a_second_executor_on_the_same_cluster_is_refused_quickly(sim):
    """Each executor holds every node's coevo_sandbox unit: a second one cannot be placed, and
    says so instead of waiting for its start timeout."""
    sim.nodes(1)
    with RayExecutor(address=sim.address, slots=1):
        t0 = time.monotonic()
        with pytest.raises(RayBackendError, match="held by other executors"):
            RayExecutor(address=sim.address, slots=1, start_timeout_s=100)
        assert time.monotonic() - t0 < 40


def test_executors_that_share_the_nodes_run_side_by_side(sim):
    """share=0.5: two executors (two training processes) on one node of 2 CPUs, a slot each."""
    sim.nodes(1)
    tests = [{"input": f"{i}\n", "output": f"{i}\n"} for i in range(4)]
    job = {"programs": [SLOW_OK, SLOW_WRONG], "tests": tests}
    with RayExecutor(address=sim.address, share=0.5) as a, \
            RayExecutor(address=sim.address, share=0.5) as b:
        assert a.isolation["slots"] == b.isolation["slots"] == 1
        out: dict = {}
        threads = [threading.Thread(target=lambda k=k, ex=ex: out.update({k: ex.run([job])[0]}))
                   for k, ex in (("a", a), ("b", b))]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert out["a"]["outcomes"] == out["b"]["outcomes"] == [["ok"] * 4, ["wrong_answer"] * 4]


def test_without_ray_the_error_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError) as e:
        RayExecutor()
    assert isinstance(e.value, RayMissingError) and str(e.value) == INSTALL_HINT


def test_ctrl_c_cancels_and_the_executor_still_works(sim):
    import signal
    sim.nodes(1)
    tests = [{"input": f"{i}\n", "output": f"{i}\n"} for i in range(10)]
    # Ctrl-C as a terminal delivers it, to Python's own SIGINT handler (a library that an
    # earlier test of the session imported may have installed another in this process)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with RayExecutor(address=sim.address, slots=2) as ex:
            timer = threading.Timer(1.0, _thread.interrupt_main)
            t0 = time.monotonic()
            timer.start()
            with pytest.raises(KeyboardInterrupt):
                ex.run([{"programs": [f"{SLOW_OK}\n# {i}" for i in range(10)],
                         "tests": tests}])  # about 10 s of work
            assert time.monotonic() - t0 < 5
            res = ex.run([{"programs": ["print(input())"], "tests": tests}])[0]
            assert res["outcomes"] == [["ok"] * 10]
    finally:
        signal.signal(signal.SIGINT, old)


# ---- 4. through the factory, and the doctor ------------------------------------------------------
def test_make_executor_connects_to_the_cluster(sim, fixtures, local_results):
    sim.nodes(1)
    ray.shutdown()  # let the executor connect (and disconnect) itself
    try:
        with make_executor("ray", address=sim.address, slots=2, launcher="direct") as ex:
            assert isinstance(ex, RayExecutor) and isinstance(ex, ExecutorProtocol)
            assert ray.is_initialized()
            assert ex.isolation["launcher"] == "direct"  # the options reach the node
            got = ex.run(workload(fixtures)[:4])
            _check_same(local_results[:4], _strip(got))
        assert not ray.is_initialized()  # it started the connection, so it closed it
    finally:
        sim.connect()


LOCAL_INSTANCE = """
import json, socket, ray
from coevo_code.execution import make_executor
ex = make_executor("ray", slots=1)
res = ex.run([{"programs": ["print(input())", "print(2)"],
               "tests": [{"input": "1", "output": "1"}]}])
host, port = ray.get_runtime_context().gcs_address.rsplit(":", 1)
try:  # this host's routable address (a UDP connect sends nothing)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.connect(("10.255.255.255", 1))
    ip = u.getsockname()[0]
except OSError:
    ip = None
outside = None
if ip and not ip.startswith("127."):
    try:
        socket.create_connection((ip, int(port)), 2).close()
        outside = True
    except OSError:
        outside = False
print(json.dumps({"outcomes": res[0]["outcomes"], "gcs_host": host, "outside": outside,
                  "nodes": len(ex.isolation["nodes"])}))
ex.close()
"""


def test_without_an_address_a_private_local_instance_runs_the_jobs(tmp_path):
    """No address and no node with the resource: one actor on the driver's node, in a Ray
    instance of this executor's own, which listens on 127.0.0.1 only."""
    import json
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["OMP_NUM_THREADS"] = "1"
    r = subprocess.run([sys.executable, "-c", LOCAL_INSTANCE], capture_output=True, text=True,
                       timeout=240, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["outcomes"] == [["ok"], ["wrong_answer"]] and out["nodes"] == 1
    assert out["gcs_host"] == "127.0.0.1"
    assert out["outside"] is not True  # not reachable on the host's network address


def test_doctor_report_lists_each_node(sim):
    sim.nodes(2)
    text = doctor_report(sim.address)
    assert "2 sandbox node(s)" in text
    assert text.count("launcher ") == 2 and "[on ] seccomp" in text


# ---- training through one Ray pool ----------------------------------------------------------------
def _sandbox_actor_jobs() -> set:
    """The Ray jobs (drivers) that started sandbox actors on the cluster, dead or alive (the
    GCS's actor table; no dashboard needed)."""
    from ray._private import state
    return {a["JobID"] for a in state.actors().values()
            if a.get("ActorClassName", "").endswith("SandboxWorker")}


def test_a_two_process_training_step_scores_through_the_ray_pool(sim, tmp_path):
    """torchrun, 2 processes (gloo): each process opens the Ray backend on the same cluster with
    half of every node, and the rewards are exactly those the local sandbox gives."""
    import json
    import os
    import subprocess

    pytest.importorskip("trl")
    sys.path.insert(0, str(HERE))
    from training_helpers import bundled, expected_rewards, tiny_config

    from coevo_code.training.run import reward_options

    sim.nodes(2)
    before = _sandbox_actor_jobs()
    out = tmp_path / "dist"
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc_per_node", "2", str(HERE / "dist_train_script.py"), str(out),
                        "local", sim.address],
                       env={**os.environ, "OMP_NUM_THREADS": "1",
                            "TRL_EXPERIMENTAL_SILENCE": "1"},
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["steps"] for r in ranks] == [2, 2]
    assert len(_sandbox_actor_jobs() - before) == 2  # one driver per process, one pool
    tasks = bundled(6)
    with Executor(slots=2) as ex:
        for c0, c1 in zip(ranks[0]["calls"], ranks[1]["calls"]):
            rows = [tuple(x) for x in c0[1] + c1[1]]
            want = expected_rewards(tasks, rows, reward_options(tiny_config(tmp_path / "x")),
                                    ex)
            assert c0[2] + c1[2] == pytest.approx(want)
    resolved = json.loads((out / "resolved_config.json").read_text())
    assert (resolved["exec_backend"], resolved["exec_address"]) == ("ray", sim.address)


def test_a_pair_run_scores_through_one_ray_pool(sim, tmp_path):
    """`coevo train` with the pair config (the warm-started tiny models on the task world, so
    that programs parse and run): both agents (one process each) execute on the same cluster;
    every step of both runs judged cells there."""
    import json
    import os
    import subprocess

    pytest.importorskip("trl")
    sim.nodes(2)
    before = _sandbox_actor_jobs()
    cfg = tmp_path / "pair.yaml"
    cfg.write_text((HERE.parent / "configs" / "pair-tiny-random-cpu.yaml").read_text()
                   .replace("tiny-llama-random", "tiny-llama").replace("tiny-random", "tiny")
                   .replace("tasks: bundled", "tasks: world\ntasks_split: train"))
    run = tmp_path / "pair"
    p = subprocess.run([sys.executable, "-m", "coevo_code.cli", "train", "--config",
                        str(cfg), "--output_dir",
                        str(run), "--max_steps", "1", "--exec_backend", "ray",
                        "--exec_address", sim.address],
                       env={**os.environ, "OMP_NUM_THREADS": "1",
                            "TRL_EXPERIMENTAL_SILENCE": "1"},
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert len(_sandbox_actor_jobs() - before) == 2  # one driver per agent
    for agent in ("qwen", "llama"):
        steps = [json.loads(x) for x in (run / agent / "metrics.jsonl").read_text().splitlines()]
        assert [s["step"] for s in steps] == [1] and steps[0]["exec_cells"] > 0
