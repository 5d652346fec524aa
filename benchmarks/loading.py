"""Peak memory of loading a large CodeContests split: our loader against the list of dicts.

Generates (seeded, in a temporary directory, deleted afterwards) a split in the CodeContests
schema of about ``--size-gb`` GB of JSON lines: rows of about 0.5 MB like the real train split's
average (a statement, 2 public, 10 private and ~80 generated tests, 30 correct and 10 incorrect
solutions in several languages, limits). Then, each in a fresh interpreter, measures the peak
resident memory (``ru_maxrss`` of that child) and the wall time of:

- ``imports``: importing the loaders and nothing else (the floor);
- ``list of dicts``: ``read_records``, the way the loader worked before, a list of every row as
  a Python dict (the old loader built its tasks from that list, so its peak was at least this);
- ``load_tasks``: ``load_tasks("codecontests", path)``, which iterates the rows and keeps each
  task's statement, examples and counts, its gold tests and solutions decoded from the row when
  used; the child then reads every task's test count and decodes the tests of 50 tasks, as a
  training step would.

Prints the file size, each peak, and the ratios.

    python benchmarks/loading.py [--size-gb 2] [--seed 0] [--skip-old]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = {
    "imports": "import coevo_code.tasks",
    "list of dicts": ("from coevo_code.tasks.loaders import read_records\n"
                      "rows, _ = read_records(PATH, 'codecontests')\n"
                      "print(len(rows), sum(len(r['generated_tests']['input']) for r in rows))"),
    "load_tasks": ("from coevo_code.tasks import load_tasks\n"
                   "ts = load_tasks('codecontests', PATH)\n"
                   "n = sum(len(t.tests) for t in ts)\n"
                   "decoded = sum(len(list(t.tests)) for t in ts.tasks[::max(1, len(ts) // 50)])\n"
                   "print(len(ts), n, decoded)"),
}


def generate(path: Path, size_bytes: int, seed: int) -> int:
    """Rows until the file holds ``size_bytes``; text is cut from one seeded pool at random
    offsets (fast, and every field distinct)."""
    rng = random.Random(seed)
    pool = rng.randbytes(3 << 20).hex()  # 6 MB of [0-9a-f]
    words = [pool[i:i + rng.randint(1, 9)] for i in range(0, 200_000, 10)]

    def text(n: int) -> str:
        start = rng.randrange(len(pool) - n)
        return pool[start:start + n]

    def tests(count: int, size: int) -> dict:
        ins = [" ".join(words[rng.randrange(len(words))] for _ in range(8)) + "\n"
               + text(rng.randint(size // 2, size * 3 // 2)) + "\n" for _ in range(count)]
        return {"input": ins, "output": [text(rng.randint(4, 200)) + "\n" for _ in ins]}

    def sols(count: int) -> dict:
        langs = [rng.choice([1, 2, 3, 3, 4]) for _ in range(count)]
        return {"language": langs, "solution": [text(rng.randint(300, 2500)) for _ in langs]}

    written = rows = 0
    with open(path, "w", encoding="utf-8") as f:
        while written < size_bytes:
            row = {"name": f"{rows}_A. Synthetic {rows}", "description": text(2500),
                   "public_tests": tests(2, 200), "private_tests": tests(10, 2000),
                   "generated_tests": tests(rng.randint(60, 100), 5000),
                   "source": 2, "difficulty": rng.randint(1, 12), "solutions": sols(30),
                   "incorrect_solutions": sols(10), "cf_contest_id": rows, "cf_index": "A",
                   "cf_points": 500.0, "cf_rating": 800, "cf_tags": ["math"],
                   "is_description_translated": False, "untranslated_description": "",
                   "time_limit": {"seconds": 2, "nanos": 0}, "memory_limit_bytes": 256 << 20,
                   "input_file": "", "output_file": ""}
            line = json.dumps(row) + "\n"
            f.write(line)
            written += len(line)
            rows += 1
    return rows


def measure(code: str, path: Path) -> tuple[float, float, str]:
    """(peak RSS MB, wall s, stdout) of ``code`` in a fresh interpreter, which reports its own
    ``ru_maxrss`` at the end."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    tail = "\nimport resource\nprint(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", f"PATH = {str(path)!r}\n{code}{tail}"],
                       capture_output=True, env=env, text=True)
    wall = time.perf_counter() - t0
    if p.returncode:
        err = p.stderr.strip().splitlines()
        raise SystemExit(f"child failed: {err[-1] if err else p.returncode}")
    *out, rss_kb = p.stdout.strip().splitlines()
    return int(rss_kb) / 1024, wall, " ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-old", action="store_true", help="do not measure the list of dicts")
    ap.add_argument("--dir", default=None, help="where to write the split (default: a temp dir)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="coevo-loading-") as tmp:
        path = Path(tmp) / "code_contests_synthetic.jsonl"
        t0 = time.perf_counter()
        rows = generate(path, int(args.size_gb * (1 << 30)), args.seed)
        size_mb = path.stat().st_size / (1 << 20)
        print(f"split: {rows} rows, {size_mb:.0f} MB of JSON lines "
              f"({size_mb / rows:.2f} MB a row), generated in {time.perf_counter() - t0:.0f} s")
        results = {}
        for what in CHILD:
            if what == "list of dicts" and args.skip_old:
                continue
            results[what] = measure(CHILD[what], path)
            rss, wall, out = results[what]
            print(f"{what:>14}: peak RSS {rss:8.0f} MB, {wall:6.1f} s   ({out})")
        floor = results["imports"][0]
        new = results["load_tasks"][0]
        print(f"load_tasks holds {new - floor:.0f} MB above the imports for a {size_mb:.0f} MB "
              f"split: {(new - floor) / size_mb:.3f} of the file size")
        if "list of dicts" in results:
            old = results["list of dicts"][0]
            print(f"list of dicts holds {old - floor:.0f} MB above the imports: "
                  f"{(old - floor) / size_mb:.2f} of the file size; "
                  f"peak ratio list of dicts / load_tasks = {old / new:.1f}")


if __name__ == "__main__":
    main()
