#!/usr/bin/env bash
# CI: a Docker engine and the docker launcher's image, so that the docker parameters of the
# sandbox tests run instead of skipping. The image holds the host's g++ and JDK where they are
# installed (.ci/run installs them first), so that the C++ and Java suites run under docker too.
# Idempotent: installs docker.io only where dockerd is missing, starts dockerd only where no
# engine answers, and `coevo build-image` does nothing when the image is up to date. Never fails
# the CI: where Docker cannot run here it prints one line saying why and exits 0 (the docker
# tests then skip, giving their reason).
#
# usage: .ci/docker.sh [PYTHON]   (PYTHON: the interpreter whose installation and numpy go into
#                                  the image, with coevo and the docker SDK importable; default
#                                  .venv-ci/bin/python, else python3)
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${1:-${COEVO_CI_VENV:-$PWD/.venv-ci}/bin/python}"
[ -x "$PY" ] || PY=python3
TAG="${COEVO_SANDBOX_IMAGE:-coevo-sandbox:latest}"
LOG="${COEVO_DOCKERD_LOG:-/tmp/coevo-dockerd.log}"
t0=$(date +%s)

skip() { echo "ci: docker: $* - the docker tests will skip"; exit 0; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"; else return 1; fi; }
engine_up() { timeout 10 docker info >/dev/null 2>&1; }

if ! command -v dockerd >/dev/null 2>&1; then
  { as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq docker.io >/dev/null 2>&1; } \
    || skip "could not install docker.io (apt-get failed or no root)"
fi
command -v docker >/dev/null 2>&1 || skip "no docker CLI after installing docker.io"

wait_engine() {  # $1: seconds; gives up early when the dockerd started (pid in $2) has died
  for _ in $(seq "$1"); do
    engine_up && return 0
    as_root kill -0 "$2" 2>/dev/null || return 1
    sleep 1
  done
  return 1
}

if ! engine_up; then
  # First the engine's defaults; then, for hosts where it cannot set up its bridge network or
  # overlay file systems (containers in containers), without them: the sandbox needs only
  # --network none and a read-only root.
  started=""
  PIDF=/tmp/coevo-dockerd.pid
  for flags in "" "--iptables=false --ip6tables=false --bridge=none --storage-driver=vfs"; do
    as_root sh -c "nohup dockerd $flags >>'$LOG' 2>&1 & echo \$! >'$PIDF'" \
      || skip "cannot start dockerd (no root)"
    pid=$(cat "$PIDF")
    if wait_engine 30 "$pid"; then started="dockerd ${flags:-(defaults)}"; break; fi
    as_root kill "$pid" >/dev/null 2>&1; sleep 3   # the dockerd this script started, if alive
  done
  [ -n "$started" ] || skip "dockerd did not come up ($(grep -Ei 'level=(error|fatal)' "$LOG" | tail -1 | cut -c1-200))"
  echo "ci: docker: started $started, log $LOG"
fi
docker info >/dev/null 2>&1 || skip "the engine does not answer this user (docker group?)"
t1=$(date +%s)

"$PY" -m coevo_code.execution.image --tag "$TAG" || skip "coevo build-image failed (see above)"
langs=$(docker image inspect -f '{{index .Config.Labels "coevo.languages"}}' "$TAG" 2>/dev/null)
out=$(timeout 60 docker run --rm --network none --read-only "$TAG" \
      /usr/local/bin/python3 -I -c 'import numpy; print("ok")' 2>&1) \
  || skip "the engine cannot run a container here: $(echo "$out" | tail -1 | cut -c1-200)"
echo "ci: docker: engine ready in $((t1 - t0)) s, image $TAG (${langs:-?}) ready in $(($(date +%s) - t1)) s"
