#!/usr/bin/env bash
# Issue 31 on a lent GPU: which live run of chapter 13 translates the held-out verses? Four
# configurations of benchmarks/reader_budget.py side by side on one GPU (their times are
# therefore not the GPU's alone; steps, tokens and scores are exact), each scored on every
# validation verse (WEB -> Louis Segond, greedy) at several points of its budget.
#   device run: bash benchmarks/live_grid_gpu.sh   (carry .gpu-cache, as gpu_session.sh)
set -u
OUT=${OUT:-/tmp/gpu-out}
LIMIT=${LIMIT:-470}
mkdir -p /tmp/tl-cache "$OUT"
gunzip -c .gpu-cache/bible-verses-v2.tsv.gz > /tmp/tl-cache/bible-verses-v2.tsv
export TRANSFORMER_LIT_CACHE=/tmp/tl-cache PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python3 -c "import torch, sys; print(sys.version, torch.__version__, torch.version.cuda)" \
  >> "$OUT/env.txt" 2>&1
common="--device cuda --threads 4 --vocab-size 8000 --max-words 0"
grid() {  # name, options
  local name=$1; shift
  timeout "$LIMIT" python3 benchmarks/reader_budget.py $common --name "$name" --out "$OUT/$name.json" "$@" \
    > "$OUT/$name.log" 2>&1
  echo "$name: exit $?" >> "$OUT/exits.txt"
}
grid small-all --preset small --pairings all --max-tokens 12288 --warmup 400 \
  --steps 500 1000 1500 2000 3000 4000 &
grid small-weblsg --preset small --pairings web-lsg --max-tokens 12288 --warmup 400 \
  --steps 500 1000 2000 3000 &
grid base-all --preset base --pairings all --steps 1000 2000 3000 &
grid base-all-w800 --preset base --pairings all --warmup 800 --steps 1000 2000 3000 &
wait
grep -h '"steps"' "$OUT"/*.log | cut -c1-220
cat "$OUT/exits.txt"
