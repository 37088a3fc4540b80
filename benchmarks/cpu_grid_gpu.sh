#!/usr/bin/env bash
# Issue 31 on a lent GPU: candidates for chapter 13's CPU run (the cpu preset's 1,024-token
# batches, float32, as a CPU computes them), trained side by side on one GPU and scored by
# steps on the short validation verses (WEB at most MAXW words, against Louis Segond, greedy);
# the CPU minutes that a step budget costs are measured on the CPU afterwards.
#   device run: bash benchmarks/cpu_grid_gpu.sh   (carry .gpu-cache)
set -u
OUT=${OUT:-/tmp/gpu-out}
LIMIT=${LIMIT:-170}
mkdir -p /tmp/tl-cache "$OUT"
gunzip -c .gpu-cache/bible-verses-v2.tsv.gz > /tmp/tl-cache/bible-verses-v2.tsv
export TRANSFORMER_LIT_CACHE=/tmp/tl-cache PYTHONPATH=$PWD PYTHONUNBUFFERED=1
common="--device cuda --threads 2 --no-amp --preset cpu --steps 700 1400 2100"
grid() {  # name, options
  local name=$1; shift
  timeout "$LIMIT" python3 benchmarks/reader_budget.py $common --name "$name" \
    --out "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: exit $?" >> "$OUT/exits.txt"
}
grid w20-lsg-v4k --max-words 20 --train-max-words 20 --pairings web-lsg &
grid w20-all-v4k --max-words 20 --train-max-words 20 --pairings all &
grid w20-all-v2k --max-words 20 --train-max-words 20 --pairings all --vocab-size 2000 &
grid w20-lsg-v2k --max-words 20 --train-max-words 20 --pairings web-lsg --vocab-size 2000 &
grid w20-all-v1k --max-words 20 --train-max-words 20 --pairings all --vocab-size 1000 &
grid w20-all-v2k-w75 --max-words 20 --train-max-words 20 --pairings all --vocab-size 2000 \
  --warmup 75 &
grid w20-all-v2k-lr2 --max-words 20 --train-max-words 20 --pairings all --vocab-size 2000 \
  --lr-factor 2 --warmup 300 &
grid all-all-v4k --max-words 20 --pairings all &
wait
grep -h '"steps"' "$OUT"/*.log | cut -c1-200
cat "$OUT/exits.txt"
