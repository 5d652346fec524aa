"""Agreement with LiveCodeBench's own grader, sample by sample: every sample of
tests/lcb_agreement.py (the real LiveCodeBench row in ../shared/data/livecodebench/, constructed
stdin and LeetCode-style rows in the exact schema, LiveBench rows), graded by us (our loader, our
executor) and by ``nvidia-livecodebench``'s ``testing_util.run_test`` (6 s per test, both sides).
Prints one table per benchmark: samples, agree, disagree with each case named, and each side's
wall time.

    python benchmarks/lcb_agreement.py [--json OUT] [--slots 2]
    python benchmarks/lcb_agreement.py --overhead 64   # the stdin checker's cost, as a ratio

``--overhead N``: N copies of a right answer to the real row (5 tests each), graded with
LiveCodeBench's stdin rule (a checker cell per test) and, as the baseline in the same run, with
the executor's built-in token comparison; prints cells/s of both and their ratio (medians of 3).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
import lcb_agreement as A


def _verdict(v: bool) -> str:
    return "pass" if v else "fail"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", type=Path, help="also write the rows here")
    p.add_argument("--slots", type=int, default=2)
    p.add_argument("--overhead", type=int, metavar="N", help="measure the checker's cost instead")
    args = p.parse_args(argv)
    from coevo_code.execution import Executor
    if args.overhead:
        return overhead(args.overhead, args.slots)
    items = A.samples()
    if not any(s.name.startswith("real") for s in items):
        print(f"note: {A.REAL_ROW} is absent (set COEVO_SHARED_DATA); the real row is left out")
    t = time.time()
    with Executor(slots=args.slots) as ex:
        ours = A.our_verdicts(items, ex)
    t_ours = time.time() - t
    t = time.time()
    theirs = A.their_verdicts(items, workers=args.slots)
    t_theirs = time.time() - t
    report = {}
    for bench, ref in (("livecodebench", "LiveCodeBench's run_test"),
                       ("livebench", "LiveCodeBench's run_test on LiveBench's program "
                                     "(LiveBench's own grader is not installable)")):
        sel = [i for i, s in enumerate(items) if s.bench == bench]
        res = A.agreement([items[i] for i in sel], [ours[i] for i in sel],
                          [theirs[i] for i in sel])
        report[bench] = res
        print(f"\n## {bench}: ours vs {ref}\n")
        print("| sample | ours | theirs | agree |")
        print("| --- | --- | --- | --- |")
        for r in res["rows"]:
            print(f"| {r['sample']} | {_verdict(r['ours'])} | {_verdict(r['theirs'])} | "
                  f"{'yes' if r['agree'] else 'NO (on purpose)' if r['on_purpose'] else 'NO'} |")
        print(f"\nsamples {res['samples']}, agree {res['agree']}, disagree "
              f"{len(res['disagree'])}")
        for r in res["disagree"]:
            print(f"- {r['sample']}: ours {_verdict(r['ours'])}, theirs {_verdict(r['theirs'])}"
                  f"{': ' + r['on_purpose'] if r['on_purpose'] else ' (NOT EXPLAINED)'}")
    print(f"\nwall time: ours {t_ours:.1f} s ({args.slots} slots), theirs {t_theirs:.1f} s "
          f"({args.slots} processes at a time)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


def overhead(n: int, slots: int) -> None:
    import statistics
    from dataclasses import replace

    from coevo_code.execution import Executor
    from coevo_code.tasks import load_tasks
    task = load_tasks("livecodebench", [str(A.REAL_ROW)])[0]
    plain = replace(task, checker=None)
    cells = n * len(task.tests)
    times = {"checker": [], "tokens": []}
    with Executor(slots=slots) as ex:
        ex.run([plain.job([A.SORT_OK])])  # warm
        for _ in range(3):
            for name, t in (("checker", task), ("tokens", plain)):
                t0 = time.perf_counter()
                res = ex.run([t.job([A.SORT_OK]) for _ in range(n)])
                times[name].append(time.perf_counter() - t0)
                assert all(all(r["passed"][0]) for r in res), name
    rate = {k: cells / statistics.median(v) for k, v in times.items()}
    print(f"{n} programs x {len(task.tests)} tests, {slots} slots: LiveCodeBench stdin rule "
          f"(checker) {rate['checker']:.1f} cells/s, token rule (baseline) "
          f"{rate['tokens']:.1f} cells/s, ratio {rate['checker'] / rate['tokens']:.2f}")


if __name__ == "__main__":
    main()
