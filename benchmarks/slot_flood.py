"""A thread flood in one slot against honest cells in the other: how many honest cells miss their
limits with the slots sharing one cgroup (as before: ``slot_cgroups=False``) and with a cgroup
per slot (now), interleaved repeat after repeat in one run.

Every arm runs in a child process that first joins a fresh CPU and pids cgroup made for it (cgroup
v1, where the host lets us make one): the slots then share a cgroup as they do in any container,
pod or Slurm job. Outside any cgroup the kernel's per-session autogroup already shares the CPU
between slots, and the flood harms nothing in either arm; the script says which case it measured.

Each repeat: an executor of 2 slots; one job with the flood (400 threads hashing outside the GIL,
``time_limit_s`` 4) and one with 5 honest programs (a 0.2 s sleep and ~0.1 s of CPU each,
``time_limit_s`` 0.5, so a 2 s wall cap), submitted together, so that one slot runs the flood
while the other runs the honest cells. Prints, per launcher and arm, the honest cells that did
not pass (N of M) and the median time of the batch.

    python benchmarks/slot_flood.py [--repeats 3] [--launchers direct,bwrap] [--before-tree DIR]

``--before-tree`` runs the "before" arm with the code of another checkout instead (``git worktree
add /tmp/base <commit>``: a commit from before the slot cgroups), to check that the arm without
them behaves as that code did.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

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
HONEST = "import time\ntime.sleep(0.2)\ns = 0\nfor i in range(1500000):\n    s += i\nprint(s)\n"
EXPECTED = str(sum(range(1500000)))


def child(launcher: str, per_slot: bool) -> dict:
    from coevo_code.execution import Executor
    from coevo_code.execution.launchers import LAUNCHERS
    try:
        chosen = LAUNCHERS[launcher](slot_cgroups=per_slot)
    except TypeError:  # code from before the slot cgroups (--before-tree)
        chosen = launcher
    with Executor(slots=2, launcher=chosen) as ex:
        ex.run([{"programs": ["print(1)"], "tests": [{"input": "", "output": "1"}]}])
        jobs = [{"id": "flood", "programs": [FLOOD], "time_limit_s": 4.0,
                 "tests": [{"input": "", "output": "x"}]},
                {"id": "honest", "programs": [HONEST + f"# {k}\n" for k in range(5)],
                 "tests": [{"input": "", "output": EXPECTED}], "time_limit_s": 0.5}]
        t = time.monotonic()
        res = ex.run(jobs)
        seconds = time.monotonic() - t
    honest = [row[0] for row in res[1]["outcomes"]]
    return {"missed": sum(o != "ok" for o in honest), "of": len(honest), "seconds": seconds,
            "flood": res[0]["outcomes"][0][0], "honest": honest}


def shared_cgroups() -> list[str]:
    made = []
    for c in ("cpu", "pids"):
        parent = Path(f"/sys/fs/cgroup/{c}")
        if (parent / "cgroup.procs").exists() and os.access(parent, os.W_OK):
            d = parent / f"coevo-bench-{os.getpid()}"
            try:
                d.mkdir(exist_ok=True)
                made.append(str(d))
            except OSError:
                pass
    return made


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--launchers", default="direct,bwrap")
    ap.add_argument("--before-tree", help="run the 'before' arm with the code in this directory")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:  # PYTHONPATH names the code under test
        print(json.dumps(child(args.child[0], args.child[1] == "1")))
        return
    dirs = shared_cgroups()
    print(f"slots share {'a fresh cgroup (as in a container)' if dirs else 'this process cgroup'}"
          f"; {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}")
    enter = "".join(f"open({d + '/cgroup.procs'!r}, 'w').write(str(os.getpid()))\n" for d in dirs)
    runner = (f"import os, runpy, sys\n{enter}sys.argv = sys.argv[1:]\n"
              "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    before = f"before ({Path(args.before_tree).name})" if args.before_tree else "shared cgroup"
    arms = {before: "0", "cgroup per slot (now)": "1"}
    got: dict = {}
    try:
        for _ in range(args.repeats):
            for launcher in args.launchers.split(","):
                for arm, flag in arms.items():
                    tree = args.before_tree if flag == "0" and args.before_tree else ROOT
                    r = subprocess.run([sys.executable, "-c", runner, __file__, "--child",
                                        launcher, flag], capture_output=True, text=True,
                                       timeout=300, env=dict(os.environ, PYTHONPATH=str(tree)))
                    if r.returncode != 0:
                        raise SystemExit(f"{launcher} / {arm}: {r.stderr.strip()[-500:]}")
                    got.setdefault((launcher, arm), []).append(
                        json.loads(r.stdout.strip().splitlines()[-1]))
    finally:
        for d in dirs:
            try:
                os.rmdir(d)
            except OSError:
                pass
    print(f"{'launcher':<8} {'arm':<24} {'honest cells missed':>20} {'batch s (median)':>17}")
    for (launcher, arm), rs in got.items():
        missed, of = sum(r["missed"] for r in rs), sum(r["of"] for r in rs)
        print(f"{launcher:<8} {arm:<24} {f'{missed} of {of}':>20} "
              f"{statistics.median(r['seconds'] for r in rs):>17.1f}")


if __name__ == "__main__":
    main()
