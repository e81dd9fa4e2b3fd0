#!/usr/bin/env bash
# A quick end-to-end check on a GPU machine: a few candidates through `kernelcraft eval --json`.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 KERNELCRAFT_CACHE=${KERNELCRAFT_CACHE:-/tmp/kc-cache}
out=${OUT:-/tmp/kc-out}; mkdir -p "$out"
for pair in "level1/relu cuda_nvrtc/relu" "level1/softmax cuda_nvrtc/softmax" "level1/softmax triton/softmax" \
            "level1/layernorm cuda_nvrtc/layernorm" "level1/relu wrong/relu_off_by_one_nvrtc"; do
  set -- $pair
  [ -f benchmarks/candidates/$2.py ] || continue
  echo "== $1 $2"
  timeout 300 python -m kernelcraft.cli eval "$1" "benchmarks/candidates/$2.py" --json --no-compile-baseline --budget 2 \
    | tee -a "$out/smoke.jsonl" | python -c "import json,sys; d=json.loads(sys.stdin.read() or '{}'); print({k: d.get(k) for k in ('status','reasons','message','max_rel_error','runtime_ms','eager_ms','speedup_eager','roofline_fraction','compile_seconds','wall_seconds')})"
done
