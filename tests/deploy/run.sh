#!/usr/bin/env bash
# `make deploy-test`: Groundwire as containers, for real (issue #30).
#   1. builds the five service images (services/Dockerfile, as the README says), the models
#      image (from a model folder built here: deploy/models/Dockerfile.prebuilt), Redis and
#      PostgreSQL (deploy/{redis,postgres}/Dockerfile) with podman; layers are cached, so
#      a second run rebuilds only what changed;
#   2. tests/deploy/stack.py: docker-compose.yml through podman-compose (its own read_only,
#      users, volumes, env and health checks), the user's journey and the faults;
#   3. tests/deploy/pods.py: each Deployment/StatefulSet of the rendered dev and prod
#      overlays as podman containers under its own securityContext, to readiness.
# Needs podman (../shared/tools/containers-here.sh on these machines) and `make setup`.
# GROUNDWIRE_DEPLOY_CONTEXT: build the service images from another tree (default: here).
# GROUNDWIRE_DEPLOY_STEPS: which of "stack pods" to run (default both); "images" builds
# the images only (benchmarks/container_load.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
VENV=$ROOT/.venv/bin
CONTEXT=${GROUNDWIRE_DEPLOY_CONTEXT:-$ROOT}
WORK=${GROUNDWIRE_DEPLOY_WORK:-$ROOT/var/deploy-test}
STEPS=${GROUNDWIRE_DEPLOY_STEPS:-stack pods}
mkdir -p "$WORK"

command -v podman >/dev/null || { echo "deploy-test: no podman (run ../shared/tools/containers-here.sh)" >&2; exit 2; }
[ -x "$VENV/podman-compose" ] || "$VENV/pip" install -q -c constraints.txt podman-compose
[ -x "$VENV/groundwire" ] || { echo "deploy-test: run make setup first" >&2; exit 2; }

t0=$(date +%s)
build() {  # tag context dockerfile [args…]
  local tag=$1 ctx=$2 file=$3; shift 3
  local s; s=$(date +%s)
  podman build -q --env PIP_CERT=/etc/ssl/certs/ca-certificates.crt -f "$file" -t "$tag" "$@" "$ctx" >/dev/null
  echo "[deploy-test] built $tag in $(( $(date +%s) - s ))s"
}
for sp in embedder:50051 reranker:50052 retriever:50053 orchestrator:50054 gateway:8080; do
  build "groundwire/${sp%%:*}:dev" "$CONTEXT" "$CONTEXT/services/Dockerfile" \
    --build-arg SERVICE="${sp%%:*}" --build-arg PORT="${sp##*:}"
done
build groundwire/redis:dev deploy/redis deploy/redis/Dockerfile
build groundwire/postgres:dev deploy/postgres deploy/postgres/Dockerfile
models=$WORK/models-context
if [ ! -f "$models/models/minilm/groundwire-model.json" ]; then
  rm -rf "$models/models/minilm"
  "$VENV/groundwire" models build minilm --out "$models/models/minilm" >/dev/null
fi
build groundwire/models:dev "$models" deploy/models/Dockerfile.prebuilt
echo "[deploy-test] images ready in $(( $(date +%s) - t0 ))s"

rc=0
for step in $STEPS; do
  s=$(date +%s)
  case $step in
    stack) "$VENV/python" tests/deploy/stack.py --work "$WORK/stack" || rc=1 ;;
    pods) "$VENV/python" tests/deploy/pods.py --work "$WORK/pods" || rc=1 ;;
    images) ;;
    *) echo "deploy-test: unknown step $step" >&2; exit 2 ;;
  esac
  echo "[deploy-test] step $step took $(( $(date +%s) - s ))s"
done
echo "[deploy-test] total $(( $(date +%s) - t0 ))s (rc=$rc)"
exit $rc
