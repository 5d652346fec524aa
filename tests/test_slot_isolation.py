"""Slots isolated from each other: a thread flood or a grab for process ids in one slot leaves the
honest cells of the other slot on time, under every launcher available here.

Each launcher's scenarios run in a child process that first joins a fresh CPU (and pids) cgroup
of its own where the host lets us make one: the slots then share a cgroup as they do in any
container, pod or Slurm job, where the kernel's per-session autogroup no longer shares the CPU
between them (outside any cgroup it does, and the flood would harm nothing even without the slot
cgroups). Both attacks are bounded (400 threads for 4 CPU seconds; at most 3,000 threads for a
second and a half) and the test checks that nothing of them is left running.

    python tests/test_slot_isolation.py LAUNCHER    # one launcher's scenarios, JSON on stdout
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import REPO, launchers, owned_processes

from coevo_code.execution import Executor
from coevo_code.execution.slot_cgroups import SLOT_PIDS_MAX, host_plan

pytestmark = pytest.mark.slow  # a thread flood in one slot while the others run, per launcher

# 400 threads that spend their time outside the GIL (hashing 16 MiB at a time), for the cell's
# whole CPU limit (4 s: over 2 s of wall time even on 2 idle cores): without a CPU share per
# slot, every other cell on the machine gets about 1/400 of a core meanwhile
FLOOD = """
import hashlib, threading
threading.stack_size(1 << 16)
buf = b'x' * (1 << 24)
def spin():
    while True:
        hashlib.sha256(buf).digest()
ts = [threading.Thread(target=spin, daemon=True) for _ in range(400)]
for t in ts:
    t.start()
ts[0].join()
"""
# as many threads as it can get, up to 3,000 (so that the test never takes the host's pids; with
# one malloc arena and small stacks the memory limit would allow some 10,000), held for a second
# and a half; "pwned" if it got more than a slot may have
GRAB = """
import ctypes, threading, time
ctypes.CDLL(None).mallopt(-8, 1)  # M_ARENA_MAX: no 64 MiB arena per thread under the memory limit
threading.stack_size(1 << 16)
stop = threading.Event()
n = 0
try:
    for _ in range(3000):
        threading.Thread(target=stop.wait, daemon=True).start()
        n += 1
except RuntimeError:
    pass
print("pwned" if n > %d else n, flush=True)
time.sleep(1.5)
stop.set()
""" % SLOT_PIDS_MAX
# an honest program: a short sleep (the attack is under way by then), ~0.1 s of CPU (its limit is
# 0.5 s, so 2 s of wall time), and (in the grab scenario) threads of its own, which need process
# ids of its slot
HONEST = """
import threading, time
time.sleep(0.2)
box = []
ts = [threading.Thread(target=box.append, args=(k,)) for k in range(%d)]
for t in ts:
    t.start()
for t in ts:
    t.join()
s = 0
for i in range(1500000):
    s += i
print(s + len(box) - %d)
"""
EXPECTED = str(sum(range(1500000)))


def honest_job(name: str, threads: int) -> dict:
    # five programs that differ in a comment only: each is run (copies would not be)
    return {"id": name, "programs": [HONEST % (threads, threads) + f"# {k}\n" for k in range(5)],
            "tests": [{"input": "", "output": EXPECTED}], "time_limit_s": 0.5}


def slot_cgroup_dirs(token: str) -> list[str]:
    out = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        out += [os.path.join(root, d) for d in dirs if token in d]
    return out


def scenarios(launcher: str) -> dict:
    """Both attacks against one executor of two slots; what happened, as plain data."""
    out: dict = {}
    with Executor(slots=2, launcher=launcher) as ex:
        ex.run([{"programs": ["print(1)"], "tests": [{"input": "", "output": "1"}]}])
        out["layers"] = {k: list(v) for k, v in ex.isolation["layers"].items()
                         if k.startswith("slot-")}
        out["judge_cgroups"] = [Path(f"/proc/{p}/cgroup").read_text() if launcher != "docker"
                                else "" for p in ex.server_pids()]
        servers, procs = ex.server_pids(), owned_processes(ex)
        # the attack first: one slot takes its unit, the other the honest units
        res = ex.run([{"id": "flood", "programs": [FLOOD], "time_limit_s": 4.0,
                       "tests": [{"input": "", "output": "pwned"}]}, honest_job("honest", 0)])
        out["flood"] = res[0]["outcomes"][0][0]
        out["flood_honest"] = [row[0] for row in res[1]["outcomes"]]
        res = ex.run([{"id": "grab", "programs": [GRAB], "return_outputs": True,
                       "tests": [{"input": "", "output": "pwned"}]}, honest_job("honest", 16)])
        out["grab"] = res[0]["outcomes"][0][0]
        out["grab_output"] = res[0]["outputs"][0][0].strip()
        out["grab_honest"] = [row[0] for row in res[1]["outcomes"]]
        out["servers_kept"] = ex.server_pids() == servers
        out["left_after_jobs"] = len(set(owned_processes(ex)) - set(procs))
        out["next_job"] = ex.run([{"programs": ["print(2)"],
                                   "tests": [{"input": "", "output": "2"}]}])[0]["outcomes"]
        token = ex.token
    out["left_after_close"] = len(owned_processes(ex))
    out["cgroups_left"] = slot_cgroup_dirs(token)
    return out


def shared_cgroup_dirs() -> list[str]:
    """A fresh cgroup per CPU and pids hierarchy (v1), made here for one child process: the
    container the slots share. Empty where the host does not let us make one."""
    made = []
    for c in ("cpu", "pids"):
        parent = Path(f"/sys/fs/cgroup/{c}")
        if not (parent / "cgroup.procs").exists() or not os.access(parent, os.W_OK):
            continue
        d = parent / f"coevo-shared-{os.getpid()}"
        try:
            d.mkdir(exist_ok=True)
            made.append(str(d))
        except OSError:
            pass
    return made


@pytest.fixture(scope="module", params=launchers(docker=True))
def outcome(request):
    dirs = shared_cgroup_dirs()
    enter = "".join(f"open({d + '/cgroup.procs'!r}, 'w').write(str(os.getpid()))\n"
                    for d in dirs)
    code = ("import json, os, sys\n" + enter + f"sys.path.insert(0, {str(REPO / 'tests')!r})\n"
            "from test_slot_isolation import scenarios\n"
            f"print(json.dumps(scenarios({request.param!r})))\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, cwd=str(REPO), env=env)
    finally:
        for d in dirs:
            try:
                os.rmdir(d)
            except OSError:
                pass
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res["shared_cgroup"] = bool(dirs)
    return res


def needs(outcome, layer: str, controller: str) -> None:
    """Skip where this host cannot hold the layer (no cgroup we may make, and for pids no slot
    uid either): ``coevo doctor`` says so there. Where it can, the layer must be on."""
    on, why = outcome["layers"][layer]
    if not on and controller not in host_plan().parents:
        pytest.skip(f"{layer} cannot hold on this host: {why}")
    assert on, why


def test_a_thread_flood_leaves_other_slots_on_time(outcome):
    needs(outcome, "slot-cpu", "cpu")
    assert outcome["flood"] == "timeout"
    assert outcome["flood_honest"] == ["ok"] * 5, outcome
    if outcome["judge_cgroups"][0]:  # direct, bwrap: each judge in a CPU cgroup of its own
        cpu = [[line for line in text.splitlines()
                if "cpu" in line.split(":")[1].split(",") or line.startswith("0::")]
               for text in outcome["judge_cgroups"]]
        cpu = [c[0] for c in cpu]
        assert len(set(cpu)) == 2, cpu


def test_a_pid_grab_is_bounded_per_slot(outcome):
    needs(outcome, "slot-pids", "pids")
    assert outcome["grab"] != "ok", outcome["grab_output"]
    assert int(outcome["grab_output"]) < SLOT_PIDS_MAX  # every launcher: at most a slot's share
    assert outcome["grab_honest"] == ["ok"] * 5, outcome


def test_nothing_of_the_attacks_is_left(outcome):
    assert outcome["servers_kept"]
    assert outcome["left_after_jobs"] == 0
    assert outcome["next_job"] == [["ok"]]
    assert outcome["left_after_close"] == 0
    assert outcome["cgroups_left"] == []


if __name__ == "__main__":
    print(json.dumps(scenarios(sys.argv[1])))


# ---- what `coevo doctor` says where the layers cannot hold ---------------------------------------
def test_without_slot_cgroups_the_report_says_what_is_open():
    from coevo_code.execution.launchers import DirectLauncher, DockerLauncher
    off = DirectLauncher(slot_cgroups=False)
    layers = off.slot_layers({"uid": (False, "not root")})
    assert not layers["slot-cpu"][0] and "thread flood" in layers["slot-cpu"][1]
    assert not layers["slot-pids"][0]
    assert ("every process id" if os.geteuid() == 0 else "ulimit") in layers["slot-pids"][1]
    # a slot uid bounds each slot's processes (RLIMIT_NPROC counts for it), not its CPU share
    layers = off.slot_layers({"uid": (True, "uid 61000")})
    assert layers["slot-pids"][0] and "RLIMIT_NPROC" in layers["slot-pids"][1]
    assert not layers["slot-cpu"][0]
    # a container is a cgroup of its own
    assert all(on for on, _ in DockerLauncher().slot_layers({}).values())


def test_slots_run_without_cgroups_when_disabled():
    from coevo_code.execution.launchers import DirectLauncher
    with Executor(slots=1, launcher=DirectLauncher(slot_cgroups=False)) as ex:
        assert "disabled" in ex.isolation["layers"]["slot-cpu"][1]
        own = Path("/proc/self/cgroup").read_text()
        assert Path(f"/proc/{ex.server_pids()[0]}/cgroup").read_text() == own
        assert ex.run([{"programs": ["print(1)"], "tests": [{"input": "", "output": "1"}]}])[
            0]["outcomes"] == [["ok"]]


def test_cgroup_v2_plan_enables_what_is_delegated_and_says_why_not(tmp_path, monkeypatch):
    """cgroup v2 cannot be written here (its controllers are bound to v1): the plan's v2 branch
    on a stand-in hierarchy. Controllers enabled or enabled by us are used; one that is not
    delegated, or cannot be enabled, is off with the reason."""
    from coevo_code.execution import slot_cgroups as sc
    mine = tmp_path / "job"
    mine.mkdir()
    (mine / "cgroup.controllers").write_text("cpu memory pids\n")
    (mine / "cgroup.subtree_control").write_text("cpu\n")  # a plain file: "+pids" is accepted
    monkeypatch.setattr(sc, "_mounts", lambda: ((str(tmp_path), "/"), {}))
    monkeypatch.setattr(sc, "_own_paths", lambda: ("/job", {}))
    monkeypatch.delenv(sc.ENV_PARENT, raising=False)
    p = sc.plan()
    assert p.version == 2 and p.parents == {"cpu": str(mine), "pids": str(mine)}
    (mine / "cgroup.controllers").write_text("cpu\n")
    p = sc.plan()
    assert p.parents == {"cpu": str(mine)} and "not delegated" in p.why_not["pids"]
    (mine / "cgroup.controllers").write_text("cpu pids\n")
    (mine / "cgroup.subtree_control").unlink()
    (mine / "cgroup.subtree_control").mkdir()  # unreadable as a file: both off, and why
    p = sc.plan()
    assert not p.parents and "cannot read" in p.why_not["cpu"]
    monkeypatch.setattr(sc, "_own_paths", lambda: ("/elsewhere", {}))
    p = sc.plan()
    assert not p.parents and "not mounted" in p.why_not["pids"]


def test_a_cgroup_the_host_refuses_after_all_leaves_the_slots_running_and_says_so():
    from coevo_code.execution import slot_cgroups as sc
    from coevo_code.execution.launchers import DirectLauncher

    class Refused(DirectLauncher):
        def __init__(self):
            super().__init__()
            self.plan = sc.Plan(version=1, parents={"pids": "/nonexistent/pids",
                                                    "cpu": "/nonexistent/cpu"})

        def cgroup_plan(self):
            return self.plan

    with Executor(slots=2, launcher=Refused()) as ex:
        on, why = ex.isolation["layers"]["slot-cpu"]
        assert not on and "making a slot cgroup failed" in why
        assert "slot 0:" in why and "slot 1:" in why
        # the failure is the slot's, not the process's: the shared plan is as it was, so a
        # later start tries again (a transient failure no longer turns the layer off for good)
        assert ex.launcher.plan.parents == {"pids": "/nonexistent/pids",
                                            "cpu": "/nonexistent/cpu"}
        assert ex.run([{"programs": ["print(1)"], "tests": [{"input": "", "output": "1"}]}])[
            0]["outcomes"] == [["ok"]]
