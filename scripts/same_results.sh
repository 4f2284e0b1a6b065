#!/bin/bash
# Fingerprints what the simulator and the policies decide, to check that a change meant only
# to speed things up leaves every result the same (docs/BENCHMARKS.md):
#
#     scripts/same_results.sh MODEL OUT [DQNGPU]
#
# 80 `simulate` runs: every heuristic on one Titan Xp (with and without a 10% budget) and on
# 4 x 2 Titan Xp with 120 Poisson jobs (event logs too), and dqngpu and dqngpu-plan (MODEL, a
# `dqngpu train` checkpoint) on both clusters; five classes, seeds 1000 and 1001. Writes each
# run's JSON under OUT and prints one hash over them all: run it with the build before and
# the build after (DQNGPU, default target/release/dqngpu) and compare the hashes (or diff OUT).
set -euo pipefail
model=${1:?usage: same_results.sh MODEL OUT [DQNGPU]}
out=${2:?usage: same_results.sh MODEL OUT [DQNGPU]}
bin=${3:-target/release/dqngpu}
mkdir -p "$out"
cluster=(--gpus 4xtitanxp:2 --n-jobs 120 --arrival-rate 0.1)
for c in gpu_heavy gpu_light mem_heavy mem_light random; do
  for s in 1000 1001; do
    run=(simulate --workload "$c" --seed "$s" --format json)
    "$bin" "${run[@]}" --scheduler all > "$out/all-$c-$s.json"
    "$bin" "${run[@]}" --scheduler all --max-slowdown 10 > "$out/allb-$c-$s.json"
    "$bin" "${run[@]}" --scheduler all "${cluster[@]}" --events "$out/ev-$c-$s.csv" > "$out/allc-$c-$s.json"
    for p in dqngpu dqngpu-plan; do
      "$bin" "${run[@]}" --scheduler "$p" --model "$model" > "$out/$p-$c-$s.json"
      "$bin" "${run[@]}" --scheduler "$p" --model "$model" "${cluster[@]}" --max-slowdown 10 > "$out/$p-c-$c-$s.json"
    done
  done
done
(cd "$out" && sha256sum -- * | sha256sum | cut -d' ' -f1)
