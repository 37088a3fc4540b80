#!/usr/bin/env bash
# Issue 31 on a lent GPU: which live run of chapter 19 translates the held-out verses?
# Configurations of benchmarks/reader_budget.py side by side on one GPU (their times are
# therefore not the GPU's alone; steps, tokens and scores are exact).
#   GRID=gpu (default): chapter 19's GPU run, four configurations scored on every validation
#     verse (WEB -> Louis Segond, greedy) at several points of their budgets;
#   GRID=cpu: candidates for chapter 19's CPU run (the cpu preset's 1,024-token batches, in
#     float32 as a CPU computes them), scored by steps on the validation verses of at most 20
#     WEB words; the CPU minutes a step budget costs are measured on the CPU.
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
if [[ ${GRID:-gpu} == cpu ]]; then
  common="--device cuda --threads 2 --no-amp --preset cpu --steps 700 1400 2100"
else
  common="--device cuda --threads 4 --vocab-size 8000 --max-words 0"
fi
grid() {  # name, options
  local name=$1; shift
  timeout "$LIMIT" python3 benchmarks/reader_budget.py $common --name "$name" \
    --out "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: exit $?" >> "$OUT/exits.txt"
}
if [[ ${GRID:-gpu} == cpu ]]; then
  short="--max-words 20 --train-max-words 20"
  grid w20-lsg-v4k $short --pairings web-lsg &
  grid w20-all-v4k $short --pairings all &
  grid w20-all-v2k $short --pairings all --vocab-size 2000 &
  grid w20-lsg-v2k $short --pairings web-lsg --vocab-size 2000 &
  grid w20-all-v1k $short --pairings all --vocab-size 1000 &
  grid w20-all-v2k-w75 $short --pairings all --vocab-size 2000 --warmup 75 &
  grid w20-all-v2k-lr2 $short --pairings all --vocab-size 2000 --lr-factor 2 --warmup 300 &
  grid all-all-v4k --max-words 20 --pairings all &
else
  grid small-all --preset small --pairings all --max-tokens 12288 --warmup 400 \
    --steps 500 1000 1500 2000 3000 4000 &
  grid small-weblsg --preset small --pairings web-lsg --max-tokens 12288 --warmup 400 \
    --steps 500 1000 2000 3000 &
  grid base-all --preset base --pairings all --steps 1000 2000 3000 &
  grid base-all-w800 --preset base --pairings all --warmup 800 --steps 1000 2000 3000 &
fi
wait
grep -h '"steps"' "$OUT"/*.log | cut -c1-200
cat "$OUT/exits.txt"
