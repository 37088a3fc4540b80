#!/usr/bin/env bash
# A lent GPU's checks (../shared/GPU.md, items 1 to 3) as one command of under ten minutes,
# run from the repository root on the GPU machine:
#
#   mkdir -p .gpu-cache && gzip -c ~/.cache/transformer_lit/bible-verses-v2.tsv \
#       > .gpu-cache/bible-verses-v2.tsv.gz     # here, once; .gpu-cache is ignored by git
#   device run: bash benchmarks/gpu_session.sh  (carry .gpu-cache; $OUT set by the tool)
#
# 1. the benchmarks, alone on the GPU: MFU of a base-model training step (bench_mfu.py), then
#    the base model's decoding latency at batch 1 against its bandwidth floor (bench_decode.py);
# 2. then, side by side: the base model trained on every pairing and scored on the test books
#    (translation_run.py), and chapters 09, 13, 18, 16, 25 and 26 run as a reader runs them, from
#    the package's wheel in a fresh virtual environment (tools/run_as_script.py): in bf16,
#    then 19 and 18 again on the float16 path that a T4 takes. Chapter 19's GPU budget is cut
#    to a few hundred steps: the training run above is the long one.
# Everything it measures is packed into $OUT/gpu.tgz (results/*.json, logs, chapters/*.json),
# within SECONDS_LEFT seconds of its start (default 520), so that the tool's limit is not hit.
# ONLY_CHAPTERS=1 runs the chapters alone; FULL_RUN=1 (with it) runs only chapter 19, in bf16
# and in float16 side by side, each with its whole GPU budget (recipe.BOOK_GPU_STEPS; FP16_STEPS
# cuts the float16 one).
set -u
OUT=${OUT:-/tmp/gpu-out}
REPO=$PWD
PY=${PY:-python3}
MINUTES=${MINUTES:-4}
PRESET=${PRESET:-base}
DEADLINE=$(( $(date +%s) + ${SECONDS_LEFT:-520} ))
W=/tmp/gpu-work
rm -rf "$W"; mkdir -p "$W/results" "$W/chapters" /tmp/tl-cache "$OUT"
export PYTHONUNBUFFERED=1 TRANSFORMER_LIT_CACHE=/tmp/tl-cache
stamp() { echo "[$(date +%T)] $*"; }
left() {  # min(the given seconds, what is left before the deadline), at least 1
  local rest=$(( DEADLINE - $(date +%s) )); (( rest < $1 )) && echo $(( rest > 1 ? rest : 1 )) || echo "$1"
}

stamp start
gunzip -c .gpu-cache/bible-verses-v2.tsv.gz > /tmp/tl-cache/bible-verses-v2.tsv
{
  nvidia-smi
  $PY -c "import sys, torch; print(sys.version); print(torch.__version__, torch.version.cuda,
torch.cuda.get_device_name(), torch.cuda.get_device_capability())"
  nproc
} > "$W/env.txt" 2>&1

# the package as a reader installs it: its wheel (over the image's torch, which lives in a venv
# of its own: a venv made from it would not see its packages)
if $PY -m pip wheel -q --no-deps --no-build-isolation -w /tmp/wheel . > "$W/wheel.log" 2>&1 \
   && $PY -m pip install -q --no-deps --no-index --target /tmp/reader-site /tmp/wheel/*.whl >> "$W/wheel.log" 2>&1; then
  CHAPTER_PY="env PYTHONPATH=/tmp/reader-site $PY"
else
  echo "the wheel failed: the chapters run from the repository" | tee -a "$W/wheel.log"
  CHAPTER_PY="env PYTHONPATH=$REPO $PY"
fi
stamp "wheel done"

export PYTHONPATH=$REPO
if [[ -z "${ONLY_CHAPTERS:-}" ]]; then
stamp mfu
timeout "$(left 170)" $PY benchmarks/bench_mfu.py --device cuda > "$W/mfu.log" 2>&1
stamp decode
timeout "$(left 110)" $PY benchmarks/bench_decode.py --device cuda --dtype bfloat16 --threads 1 --model base \
  --lengths 32 128 512 --repeat-budget 6 > "$W/decode_base.log" 2>&1
cp transformer_lit/results/mfu_cuda.json transformer_lit/results/decode_base_cuda.json "$W/results/" 2>/dev/null

stamp "training and chapters"
COMPILE=""
grep -q "fast step: FAILED" "$W/mfu.log" && COMPILE="--compile"   # the plain step, compiled
(
  timeout "$(left 600)" $PY benchmarks/translation_run.py --preset "$PRESET" \
    --minutes "$MINUTES" --out /tmp/run-base $COMPILE > "$W/translation.log" 2>&1
  cp transformer_lit/results/translation_cuda.json "$W/results/" 2>/dev/null
  stamp "training done"
) &
fi
unset PYTHONPATH
mkdir -p /tmp/reader && cp nbs/*.ipynb /tmp/reader/   # outside the repository, as on Colab
# Two chains of chapters side by side share the cores: each kernel gets its part of them
# (torch's default, one thread per core in every process, stalls the CPU-side cells).
PROCESSES=3; [[ -n "${ONLY_CHAPTERS:-}" ]] && PROCESSES=2   # the training run is the third
THREADS=${CHAPTER_THREADS:-$(( $(nproc) / PROCESSES ))}
(( THREADS >= 1 )) || THREADS=1
chapter() {  # name, timeout, options
  local name=$1 limit=$2; shift 2
  local tag; tag=$name$( [[ "$*" == *float16* ]] && echo -fp16 )
  timeout "$(left "$limit")" env OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS $CHAPTER_PY "$REPO/tools/run_as_script.py" "/tmp/reader/$name.ipynb" \
    "$W/chapters/$tag.json" "$@" > "$W/chapters/$tag.log" 2>&1
  stamp "$tag: exit $?"
  # chapter 19's own record (its results.json), for transformer_lit/results/book_run_cuda.json
  [[ $name == 19_your_model ]] && cp "$TRANSFORMER_LIT_CACHE/runs/19_your_model-cuda/results.json" \
    "$W/chapters/$tag-results.json" 2>/dev/null
  return 0
}
own_cache() {  # the float16 chain's cache: chapter 19's run folder would be the other chain's
  mkdir -p /tmp/tl-cache-fp16 && cp /tmp/tl-cache/bible-verses-v2.tsv* /tmp/tl-cache-fp16/
  export TRANSFORMER_LIT_CACHE=/tmp/tl-cache-fp16
}
if [[ -n "${FULL_RUN:-}" ]]; then  # chapter 19 alone at its whole GPU budget, bf16 and float16
  ( chapter 19_your_model 450 ) &
  ( own_cache; chapter 19_your_model 450 ${FP16_STEPS:+--gpu-steps $FP16_STEPS} --float16 ) &
else
(
  chapter 09_transformer 90
  chapter 19_your_model 300 --gpu-steps 300
  chapter 18_pretrained 90
  chapter 16_inference 200
  chapter 25_speed 200
  chapter 26_fast_decoding 120
) &
(
  own_cache
  chapter 19_your_model 300 --gpu-steps 200 --float16
  chapter 16_inference 200 --float16
) &
fi
wait
stamp end
cp -r transformer_lit/results/*_cuda.json "$W/results/" 2>/dev/null
tail -n 4 "$W/mfu.log" "$W/decode_base.log" "$W/translation.log"
grep -h -o "ERROR\|AssertionError.*" "$W"/chapters/*.log | sort | uniq -c
tar -C "$W" -czf "$OUT/gpu.tgz" .
