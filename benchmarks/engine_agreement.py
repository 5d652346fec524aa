"""`coevo eval --engine vllm` against `--engine transformers`, greedy, both engines in the
model's dtype (float32 for the tiny models): for each model and benchmark, whether the two
generations.jsonl files are identical and how many verdicts differ.

    python benchmarks/engine_agreement.py OUT [--limit 20] [--models tiny,tiny-llama]
        [--benchmarks humanevalplus,mbppplus] [--max_tokens 128]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("COEVO_SHARED_DATA", ROOT.parent / "shared" / "data"))
FILES = {"humanevalplus": "humanevalplus/HumanEvalPlus.jsonl.gz",
         "mbppplus": "mbppplus/MbppPlus.jsonl.gz"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--models", default="tiny,tiny-llama")
    ap.add_argument("--benchmarks", default="humanevalplus,mbppplus")
    ap.add_argument("--max_tokens", type=int, default=128)
    a = ap.parse_args()
    out = Path(a.out)
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    rows = []
    for model in a.models.split(","):
        for bench in a.benchmarks.split(","):
            res, secs = {}, {}
            for engine in ("transformers", "vllm"):
                d = out / f"{model}-{bench}-{engine}"
                t = time.time()
                subprocess.run([sys.executable, "-m", "coevo_code.cli", "eval", "--engine", engine,
                                "--model", model, "--benchmark", bench, "--data",
                                str(SHARED / FILES[bench]), "--k_code", "1", "--k_test", "1",
                                "--limit", str(a.limit), "--temperature", "0", "--max_tokens",
                                str(a.max_tokens), "-q", "-o", str(d)],
                               check=True, env=env, stderr=subprocess.DEVNULL)
                secs[engine] = time.time() - t
                res[engine] = json.loads((d / "results.json").read_text())
            same = ((out / f"{model}-{bench}-vllm" / "generations.jsonl").read_bytes()
                    == (out / f"{model}-{bench}-transformers" / "generations.jsonl").read_bytes())
            pt = {e: r["per_task"] for e, r in res.items()}
            differ = sum(pt["vllm"][k] != pt["transformers"].get(k) for k in pt["vllm"])
            rows.append({"model": model, "benchmark": bench, "problems": len(pt["vllm"]),
                         "generations_identical": same, "verdicts_differing": differ,
                         "seconds": secs})
            print(f"{model:<11} {bench:<14} {len(pt['vllm'])} problems: generations "
                  f"{'identical' if same else 'DIFFER'}, {differ} verdict(s) differ "
                  f"(transformers {secs['transformers']:.0f} s, vllm {secs['vllm']:.0f} s, "
                  f"start-up included)", flush=True)
    (out / "engine-agreement.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
