"""A small OpenAI-compatible server for the tests: ``POST /v1/chat/completions`` answered by the
tiny model through the transformers engine, on 127.0.0.1. Prints its port on stdout, counts the
requests it served in ``--log``.

    python tests/openai_server.py --port 0 --log requests.txt
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OMP_NUM_THREADS", "1")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--log", type=Path, required=True)
    args = p.parse_args()
    import torch
    torch.set_num_threads(1)
    from coevo_code.generation.engines import Sampling, TransformersEngine
    engine = TransformersEngine("tiny", Sampling())
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, code, obj):
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            if self.path != "/v1/chat/completions":
                return self._send(404, {"error": {"message": f"no route {self.path}"}})
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            n = int(body.get("n", 1))
            engine.sampling = Sampling(temperature=body.get("temperature", 1.0),
                                       top_p=body.get("top_p", 1.0),
                                       max_tokens=body.get("max_tokens", 16),
                                       seed=body.get("seed", 0))
            with lock:  # one generation at a time: the model is not thread-safe
                texts = engine.generate([body["messages"]], n)[0]
                with open(args.log, "a") as f:
                    f.write(f"{body.get('model')} {n}\n")
            self._send(200, {"id": "x", "object": "chat.completion", "model": body.get("model"),
                             "choices": [{"index": i, "finish_reason": "length",
                                          "message": {"role": "assistant", "content": t}}
                                         for i, t in enumerate(texts)]})

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
