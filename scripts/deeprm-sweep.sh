#!/usr/bin/env bash
# DeepRM classic: 7 training configurations side by side, each pinned to its own 2 cores, as
# if each had this project's 2-core machine to itself (made for a 16-core machine).
#
# Usage: scripts/deeprm-sweep.sh BIN OUTDIR
#   BIN     the dqngpu release binary
#   OUTDIR  where the results go (created; at most 4 files):
#     summary.txt   one line per config: name, iterations, wall s, the kept iteration and its
#                   validation score, then the greedy avg slowdown on the 100 unseen sets
#                   (seed 314159; the paper's DeepRM: 2.81), completion time, and the flags
#     results.tar.gz  per config NAME: NAME.csv (training curve), NAME.json (checkpoint
#                   metadata: schedule, validation history, kept iteration), NAME.eval.json
#                   (`deeprm eval --format json`), NAME.log (stderr), NAME.safetensors
#     baselines.txt the table of `deeprm eval` for the baselines (checks the environment)
# Environment: LIMIT (training wall seconds per config, default 1500; 480 already tells the
# configs apart: each does thousands of iterations), CORES_PER_RUN (2), EVAL_LIMIT (seconds
# for each config's evaluation, default 100: a policy that holds jobs runs DeepRM's episodes
# to 20,000 steps; a timed-out evaluation is logged and its score left at 0).
# Whole run: about LIMIT + 30 s (+ EVAL_LIMIT at worst).
# Training never sees the evaluation sets: validation uses seed 271828 (100 sets).
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 BIN OUTDIR" >&2
    exit 2
fi
BIN=$1
OUTDIR=$2
LIMIT=${LIMIT:-1500}
CORES_PER_RUN=${CORES_PER_RUN:-2}
EVAL_LIMIT=${EVAL_LIMIT:-100}
if [ ! -x "$BIN" ]; then
    echo "error: $BIN is not an executable" >&2
    exit 2
fi
mkdir -p "$OUTDIR"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/deeprm-sweep.XXXXXX")

# name | flags. Every config keeps the best weights on the validation sets, checked about
# every 200 job-set passes (every 50 iterations at 4 job sets per iteration).
CONFIGS=(
    "const-1e-3|--lr 1e-3 --jobsets-per-iter 4 --eval-every 50"
    "cos-1e-3-1e-4|--lr 1e-3 --lr-final 1e-4 --jobsets-per-iter 4 --eval-every 50"
    "lin-1e-3-5e-5|--lr 1e-3 --lr-final 5e-5 --lr-decay linear --jobsets-per-iter 4 --eval-every 50"
    "cos-2e-3-1e-4|--lr 2e-3 --lr-final 1e-4 --jobsets-per-iter 4 --eval-every 50"
    "cos-1e-3-1e-4-jpi10|--lr 1e-3 --lr-final 1e-4 --jobsets-per-iter 10 --eval-every 20"
    "cos-1e-3-1e-4-jpi8-ep10|--lr 1e-3 --lr-final 1e-4 --jobsets-per-iter 8 --episodes 10 --eval-every 25"
    "cos-5e-4-5e-5-jpi2|--lr 5e-4 --lr-final 5e-5 --jobsets-per-iter 2 --eval-every 100"
)

ncpu=$(nproc)
need=$((${#CONFIGS[@]} * CORES_PER_RUN))
if [ "$ncpu" -lt "$need" ]; then
    echo "warning: $ncpu cores for $need: runs share cores, so their iteration counts are not comparable" >&2
fi

"$BIN" deeprm eval >"$OUTDIR/baselines.txt" 2>&1 &

start=$(date +%s)
pids=()
i=0
for c in "${CONFIGS[@]}"; do
    name=${c%%|*}
    flags=${c#*|}
    first=$(((i * CORES_PER_RUN) % ncpu))
    last=$(((first + CORES_PER_RUN - 1) % ncpu))
    cpus=$first-$last
    [ "$last" -lt "$first" ] && cpus=$first,$last
    (
        # shellcheck disable=SC2086 # flags are words
        RAYON_NUM_THREADS=$CORES_PER_RUN taskset -c "$cpus" "$BIN" deeprm train --preset classic --iterations 1000000 \
            --time-limit-s "$LIMIT" --quiet $flags -o "$WORK/$name.safetensors" --curve "$WORK/$name.csv" \
            >"$WORK/$name.log" 2>&1 || echo "train failed: exit $?" >>"$WORK/$name.log"
        RAYON_NUM_THREADS=$CORES_PER_RUN timeout "$EVAL_LIMIT" taskset -c "$cpus" "$BIN" deeprm eval --model "$WORK/$name.safetensors" \
            --format json >"$WORK/$name.eval.json" 2>>"$WORK/$name.log" || echo "eval failed: exit $?" >>"$WORK/$name.log"
    ) &
    pids+=($!)
    i=$((i + 1))
done
for p in "${pids[@]}"; do
    wait "$p"
done
wait

# A number after "KEY": in a pretty-printed JSON file, the first one after the line naming
# SECTION (or the first in the file when SECTION is empty).
json_num() { # FILE SECTION KEY
    awk -v sec="\"$2\"" -v key="\"$3\"" '
        sec == "\"\"" || index($0, sec) { on = 1 }
        on && index($0, key ":") { v = $0; sub(/.*: */, "", v); sub(/,.*/, "", v); print v; exit }
    ' "$1" 2>/dev/null
}

{
    echo "# DeepRM sweep: LIMIT=${LIMIT}s per config, $CORES_PER_RUN cores each, $(date -u +%FT%TZ), $(($(date +%s) - start)) s in all"
    echo "# name iterations wall_s kept_iter val_slowdown | unseen_avg_slowdown (paper 2.81) completion | flags"
    for c in "${CONFIGS[@]}"; do
        name=${c%%|*}
        flags=${c#*|}
        meta=$WORK/$name.json
        its=$(json_num "$meta" "" iterations_done)
        wall=$(json_num "$meta" "" train_wall_s)
        kept=$(json_num "$meta" selection best_iteration)
        val=$(json_num "$meta" selection best_val_avg_slowdown)
        sd=$(json_num "$WORK/$name.eval.json" deeprm avg_slowdown)
        ct=$(json_num "$WORK/$name.eval.json" deeprm avg_completion_time)
        printf '%s %s %.0f %s %.3f | %.3f %.2f | %s\n' "$name" "${its:-?}" "${wall:-0}" "${kept:-?}" "${val:-0}" \
            "${sd:-0}" "${ct:-0}" "$flags"
    done
} >"$OUTDIR/summary.txt"

tar -czf "$OUTDIR/results.tar.gz" -C "$WORK" .
rm -rf "$WORK"
cat "$OUTDIR/summary.txt"
