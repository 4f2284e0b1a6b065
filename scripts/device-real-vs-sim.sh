#!/usr/bin/env bash
# Real jobs placed by the real service on a real GPU, against what the simulator predicts for
# the same jobs (docs/SERVICE.md, "Real jobs against the simulator").
#
# On the GPU machine (python3 with PyTorch, nvidia-smi; .devbin/dqngpu from
# scripts/device-prepare.sh, or DEVBIN=DIR):
#   1. records each app alone with `dqngpu profile run` (fixed training steps, bench/gpu-pairs/job.py
#      --steps) into $OUT/lib/ (a --library);
#   2. for each scheduler in SCHEDULERS (default "greedy sjf"; `dqngpu` and `dqngpu-plan` load MODEL), starts `dqngpu serve --library
#      $OUT/lib --interference contention-h100` on a fresh database, submits the same six jobs as
#      one batch, waits for them, and writes every job's record to $OUT/SCHEDULER.json.
# Then, here: python3 scripts/real_vs_sim.py $OUT (runs `dqngpu simulate` on the same jobs and
# profiles and prints measured against simulated mean JCT and makespan).
# Every command runs under `timeout`; the whole keeps to BUDGET_S (default 560 s), skipping a
# scheduler when under 100 s are left. At the end OUT is also packed into OUT.tar.gz (the
# device tool brings back a few files only). Timings: on an H100 (2026-11-27) each profile run
# 19-38 s (Python, PyTorch and cuDNN start-up are 10-13 s of it), the exclusive (sjf) schedule
# of the six jobs 179 s with the steps below doubled; on an H200 (2026-11-28) with these steps,
# profiles 92 s in all, dqngpu-plan and greedy 35-40 s each, sjf 130 s: about 5 minutes for
# profiles and three schedulers, 3.5 more for each repeat that reuses the profiles.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DQN=${DEVBIN:-$ROOT/.devbin}/dqngpu
OUT=${OUT:-$(mktemp -d /tmp/dqngpu-rvs.XXXXXX)}
BUDGET_S=${BUDGET_S:-560}
SCHEDULERS=${SCHEDULERS:-"greedy sjf"}
# The checkpoint `--scheduler dqngpu` loads (dqngpu train -o FILE).
MODEL=${MODEL:-${DEVBIN:-$ROOT/.devbin}/m.safetensors}
PORT=${PORT:-17171}
PY=$(command -v python3 || echo python3)
H=$ROOT/scripts/service_http.py
JOB=${JOB:-$ROOT/bench/gpu-pairs/job.py}
# Extra `serve` flags (`--gpus h100:1` tries the script without a GPU, with JOB a stand-in).
SERVE_ARGS=${SERVE_ARGS:-}
# app (job.py's key, also the app name):training steps (4-12 s of training alone on an H100).
APPS=${APPS:-"ResNet18-CIFAR-10-bs64:450 DCGAN-LSUN-bs64:450 LSTM-PTB-bs20:700 ResNet50-ImageNet-bs32:150 BERT-SQuAD-bs16:140"}
# The job set, submitted in this order, all at once.
JOBS=${JOBS:-"ResNet18-CIFAR-10-bs64 ResNet18-CIFAR-10-bs64 DCGAN-LSUN-bs64 LSTM-PTB-bs20 ResNet50-ImageNet-bs32 BERT-SQuAD-bs16"}
T0=$(date +%s)
mkdir -p "$OUT/lib"
LOG=$OUT/log.txt
log() { echo "$(($(date +%s) - T0))s $*" | tee -a "$LOG"; }
left() { echo $((BUDGET_S - ($(date +%s) - T0))); }

steps_of() { for a in $APPS; do [ "${a%%:*}" = "$1" ] && echo "${a##*:}"; done; }

log "real vs sim: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1), out $OUT"
for a in $APPS; do
    app=${a%%:*}
    # A profile already in OUT/lib (a rerun with the same OUT) is kept.
    [ -s "$OUT/lib/$app.json" ] && { log "profile $app: kept"; continue; }
    [ "$(left)" -lt 60 ] && { log "out of budget before profiling $app"; exit 1; }
    log "profile $app"
    timeout 90 "$DQN" profile run --app "$app" --kind ml --interval-ms 200 -o "$OUT/lib/$app.json" -- \
        "$PY" "$JOB" --app "$app" --steps "$(steps_of "$app")" >>"$LOG" 2>&1 || log "profile $app FAILED"
done
echo "id,app,submit_s" >"$OUT/jobs.csv"
k=0
for app in $JOBS; do echo "$k,$app,0" >>"$OUT/jobs.csv"; k=$((k + 1)); done

for sched in $SCHEDULERS; do
    [ "$(left)" -lt 100 ] && { log "out of budget before $sched"; break; }
    url=http://127.0.0.1:$PORT
    model_args=()
    case $sched in dqngpu | dqngpu-plan) model_args=(--model "$MODEL") ;; esac
    "$DQN" serve --listen "127.0.0.1:$PORT" --data-dir "$OUT/db-$sched" --library "$OUT/lib" --scheduler "$sched" \
        "${model_args[@]}" --interference contention-h100 --tick-ms 200 $SERVE_ARGS >>"$OUT/serve-$sched.log" 2>&1 &
    pid=$!
    "$PY" "$H" wait "$url/healthz" 20 "$pid" >>"$LOG" 2>&1
    # One batch (POST /v1/jobs/batch), so the policy sees the six jobs at once, as the simulator does.
    batch=
    for app in $JOBS; do batch="$batch $app:$(steps_of "$app")"; done
    ids=$(timeout 15 "$PY" "$H" batch "$url" "$PY" "$JOB" $batch 2>>"$LOG")
    log "$sched: submitted $ids"
    timeout $(($(left) - 10)) "$PY" "$H" poll "$url" $(($(left) - 15)) $ids >>"$LOG" 2>&1
    log "$sched: finished (rc $?)"
    "$PY" "$H" get "$url/v1/jobs" >"$OUT/$sched.json" 2>>"$LOG"
    kill -TERM "$pid" 2>/dev/null
    sleep 1
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
done
log "done"
tar -czf "$OUT.tar.gz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
