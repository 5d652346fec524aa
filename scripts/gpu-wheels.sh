#!/usr/bin/env bash
# Fill .whl/ (git-ignored) with the wheels the GPU machine lacks, for its Python 3.12 on
# manylinux x86-64, each fetched with --no-deps: scripts/gpu-check.sh installs them there with
# --no-index --no-deps, so nothing of the device's own (torch, transformers, accelerate, peft,
# numpy, pandas, pyarrow, ...) is replaced.
#
#   scripts/gpu-wheels.sh            # download into .whl/ (PyPI through pip), then list sizes
#   scripts/gpu-wheels.sh --list     # the pins, one NAME==VERSION a line
#   scripts/gpu-wheels.sh --device   # the packages the device image has (see below)
#
# Which ones: the project's dependency closure (pyproject.toml's dependencies, walked through each
# package's Requires-Dist) minus what the device image holds. A package the device holds brings its
# own needs there, so the walk stops at it. scripts/gpu-check.sh (dry run too) recomputes the
# closure from the installed metadata and fails, naming the package, when it finds a need that is
# neither on the device nor pinned here.
#   trl           the project's pin (pyproject.toml: trl==1.16.0)
#   datasets      a project dependency and TRL's
#   dill          datasets' (dill<0.4.2) and multiprocess's
#   multiprocess  datasets' (multiprocess<0.70.20)
set -euo pipefail
cd "$(dirname "$0")/.."

PINS=(
  trl==1.16.0
  datasets==5.2.0
  dill==0.4.1
  multiprocess==0.70.19
)

# The device image's Python packages ('cuda' image, read on a machine running it on 2026-11-17;
# the workplace's device notes, KINDS.md). Normalised names (lower case, '-').
DEVICE_HAS="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage
cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops
equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch
grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna imageio iniconfig
interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown
markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13
nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir
onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker
prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing
pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout
pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers
setuptools shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch
torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope triton
typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray
xxhash yarl zipp"

case "${1:-}" in
  --list) printf '%s\n' "${PINS[@]}"; exit 0 ;;
  --device) tr -s ' \n' '\n' <<<"$DEVICE_HAS"; exit 0 ;;
  "") ;;
  *) echo "gpu-wheels.sh: unknown option $1 (use --list, --device or nothing)" >&2; exit 2 ;;
esac

DEST=.whl
mkdir -p "$DEST"
PY="${PYTHON:-python3}"
for pin in "${PINS[@]}"; do
  name="${pin%%==*}"
  # one version of each: an older wheel of the same package would stop the install there
  for old in "$DEST"/"${name//-/_}"-*.whl "$DEST"/"$name"-*.whl; do
    [ -e "$old" ] || continue
    case "$(basename "$old")" in
      "${name//-/_}-${pin##*==}-"*|"$name-${pin##*==}-"*) ;;
      *) echo "gpu-wheels: removing $(basename "$old") (pinned: $pin)"; rm -f "$old" ;;
    esac
  done
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$DEST" "$pin"
done
ls -l "$DEST"
echo "gpu-wheels: $(ls "$DEST"/*.whl | wc -l) wheels, $(du -sb "$DEST" | cut -f1) bytes in $DEST"
