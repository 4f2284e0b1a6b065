#!/bin/bash
# Times two builds of the decision-latency example against each other, alternating, so that
# both see the same minutes of the machine (docs/BENCHMARKS.md):
#
#     scripts/latency_ab.sh N MODEL A B [SCHEDULER]
#
# A and B are copies of target/release/examples/decision_latency from two builds; N runs of
# each, alternating, with MODEL (a `dqngpu train` checkpoint) and SCHEDULER (default
# dqngpu-plan). Prints, per build, the p99 at 0-5 waiting of every run, and the CPU time of
# every run (`perf stat -e task-clock`), then the medians.
set -euo pipefail
n=${1:?usage: latency_ab.sh N MODEL A B [SCHEDULER]}
model=${2:?usage: latency_ab.sh N MODEL A B [SCHEDULER]}
a=${3:?usage: latency_ab.sh N MODEL A B [SCHEDULER]}
b=${4:?usage: latency_ab.sh N MODEL A B [SCHEDULER]}
scheduler=${5:-dqngpu-plan}
stat=$(mktemp)
trap 'rm -f "$stat"' EXIT
for _ in $(seq "$n"); do
  for bin in "$a" "$b"; do
    p99=$(SCHEDULER=$scheduler perf stat -e task-clock -x, -o "$stat" "$bin" "$model" 2>&1 |
      awk '/^0-5 waiting/ {print $9}')
    cpu=$(awk -F, '/task-clock/ {printf "%.0f", $1}' "$stat")
    echo "$bin $p99 $cpu"
  done
done | python3 -c '
import statistics, sys
runs = {}
for line in sys.stdin:
    name, p99, cpu = line.split()
    runs.setdefault(name, []).append((float(p99), float(cpu)))
for name, rs in runs.items():
    p, c = [r[0] for r in rs], [r[1] for r in rs]
    print(f"{name}: p99 at 0-5 waiting (ms) {p}; median {statistics.median(p):.3f}")
    print(f"{name}: CPU (ms) {c}; median {statistics.median(c):.0f}")
'
