#!/usr/bin/env bash
# The lent GPU machine's one command (after `python -m benchmarks gpu-bundle` here):
#   bash benchmarks/gpu/run.sh [--smoke]
# Installs the carried bundles' wheels into benchmarks/gpu/site (the machine has no registry;
# git-ignored, so a second call on the same warm machine finds the first call's packages
# there), then runs each step of probe.py as its own process under its own time limit, most
# wanted first, so a step that hangs costs only itself and a run cut short still leaves its
# JSON under $OUT.
# --smoke: every step at its smallest size (on a CPU machine each GPU step says "no GPU").
# GPU_STEPS="env batcher": only those steps. The two calls of a lent session:
#   1. carry benchmarks/gpu/bundle:        GPU_RUN_SECONDS=360 bash benchmarks/gpu/run.sh
#   2. carry benchmarks/gpu/bundle-server: GPU_STEPS=server bash benchmarks/gpu/run.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bundle=${GPU_BUNDLE:-$here/bundle}
out=${OUT:-/tmp/visionstream-gpu}
smoke=
[ "${1:-}" = --smoke ] && smoke=--smoke
total=${GPU_RUN_SECONDS:-420}
site=${GPU_SITE:-$here/site}
mkdir -p "$out" "$site"
for wheels in "$bundle/wheels" "${GPU_SERVER_BUNDLE:-$here/bundle-server}/wheels"; do
  ls "$wheels"/*.whl >/dev/null 2>&1 || continue
  stamp="$site/.installed-$(ls "$wheels" | md5sum | cut -c1-12)"
  [ -e "$stamp" ] && continue
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" "$wheels"/*.whl && touch "$stamp" || echo "wheels: install failed"
done
export PYTHONPATH="$site:$repo" PYTHONUNBUFFERED=1
nvidia-smi 2>&1 | head -15 || echo "nvidia-smi: none here"
# step:limit (seconds), most wanted first (backend, batcher: ours on the GPU, new since the
# second lent run);
# compile last: inductor's first call alone can take minutes.
# server (the second call's) last: without its packages it says so at once.
for entry in env:60 backend:90 batcher:150 parity:120 torch:120 graphs:120 ort_cpu:120 end_to_end:90 decode:150 compile:180 server:240; do
  step=${entry%%:*}
  limit=${entry##*:}
  case " ${GPU_STEPS:-$step} " in *" $step "*) ;; *) continue ;; esac
  left=$((total - SECONDS))
  if [ "$left" -lt 20 ]; then
    echo "[$step] skipped: the run's $total s are spent"
    continue
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  timeout -k 5 "$limit" python3 "$here/probe.py" "$step" --bundle "$bundle" --out "$out" \
    --work "$site" $smoke || echo "[$step] ended with status $? (limit $limit s)"
done
echo "gpu run: $SECONDS s; results in $out"
if [ -z "$smoke" ] && grep -q "carry benchmarks/gpu/bundle-server" "$out/gpu-run.json" 2>/dev/null; then
  echo "next, at once on this warm machine (a second call): carry benchmarks/gpu/bundle-server," \
    "GPU_STEPS=server bash benchmarks/gpu/run.sh"
fi
