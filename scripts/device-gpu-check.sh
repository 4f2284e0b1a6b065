#!/usr/bin/env bash
# One-shot check of dqngpu's NVML code on a machine with an NVIDIA GPU.
#
# Needs the artifacts of scripts/device-prepare.sh in .devbin/ (dqngpu, profiler-gpu-test,
# service-gpu-test), python3 with PyTorch, and nvidia-smi. No cargo, no network.
# Writes to $OUT (default: a new temp folder), at most 8 files:
#   log.txt             everything every step printed, with its command, exit status and time
#   summary.txt         one line per step: PASS/FAIL, exit status, seconds
#   profile.json        `dqngpu profile run` of scripts/gpu_workload.py (step b)
#   profile_report.json that profile's phases (util/memory per phase) and checks
#   profile.png         its four curves (`dqngpu profile show --png`)
#   service_before.json the service after its jobs: GET /v1/jobs, each job, /v1/cluster, /v1/profiles
#   metrics.txt         the service's /metrics before the kill and after the restart
#   service_after.json  the same after `kill -9` and a restart on the same database
# Without a GPU every step fails quickly and the script still ends; SERVE_ARGS='--gpus h100:1'
# JOB_CMD=sleep exercise step c's logic on virtual GPUs.
# Every step runs under `timeout`; a failed step is logged and the next one runs. The whole
# script keeps to BUDGET_S (default 210 s): each step's limit is cut to what is left.
# Exit status: 0 when every step passed, 1 otherwise.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${DEVBIN:-$ROOT/.devbin}
OUT=${OUT:-$(mktemp -d /tmp/dqngpu-gpu-out.XXXXXX)}
BUDGET_S=${BUDGET_S:-210}
WORKLOAD_S=${WORKLOAD_S:-20}
JOB_S=${JOB_S:-6}
PORT=${PORT:-17070}
# For trying the script's logic without a GPU: extra `serve` flags (e.g. `--gpus h100:1`) and a
# job program to run instead of the workload (e.g. `sleep`; the seconds are appended).
SERVE_ARGS=${SERVE_ARGS:-}
JOB_CMD=${JOB_CMD:-}
mkdir -p "$OUT"
LOG=$OUT/log.txt
SUMMARY=$OUT/summary.txt
: >"$LOG"
: >"$SUMMARY"
WORK=$(mktemp -d /tmp/dqngpu-gpu-check.XXXXXX)
DQN=$BIN/dqngpu
URL=http://127.0.0.1:$PORT
PY=$(command -v python3 || echo python3)
H=$ROOT/scripts/service_http.py
T0=$(date +%s)
SERVER_PID=

log() { echo "$*" | tee -a "$LOG"; }
left() { echo $((BUDGET_S - ($(date +%s) - T0))); }

# step NAME LIMIT_S CMD...: runs CMD under timeout (cut to the budget left), logs it, records PASS/FAIL.
step() {
    local name=$1 limit=$2 rem rc t
    shift 2
    rem=$(($(left) - 5))
    if [ "$rem" -lt 3 ]; then
        log "=== [$name] SKIPPED: out of time budget"
        echo "SKIP $name (out of time budget)" >>"$SUMMARY"
        return 124
    fi
    [ "$limit" -gt "$rem" ] && limit=$rem
    log "=== [$name] $* (timeout ${limit}s, $(left)s of the budget left)"
    t=$(date +%s)
    timeout -k 5 "$limit" "$@" >>"$LOG" 2>&1
    rc=$?
    t=$(($(date +%s) - t))
    if [ "$rc" -eq 0 ]; then
        log "=== [$name] PASS in ${t}s"
        echo "PASS $name rc=0 ${t}s" >>"$SUMMARY"
    else
        [ "$rc" -eq 124 ] && log "=== [$name] TIMED OUT after ${limit}s"
        log "=== [$name] FAIL rc=$rc in ${t}s"
        echo "FAIL $name rc=$rc ${t}s" >>"$SUMMARY"
    fi
    return "$rc"
}

cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null
        sleep 1
        kill -KILL "$SERVER_PID" 2>/dev/null
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# A tiny HTTP client (curl may be absent): get URL | wait URL SECS | poll URL SECS ID... | state URL ID

log "dqngpu GPU check: $(date -u +%FT%TZ) on $(hostname), repo $ROOT, out $OUT, budget ${BUDGET_S}s"
log "artifacts: $(ls -l "$BIN" 2>&1 | tr '\n' ';')"

# ---- a. the driver, and whether our binary loads NVML and sees the card
step a1-nvidia-smi 15 nvidia-smi -L
step a2-nvidia-smi-query 15 nvidia-smi --query-gpu=index,name,memory.total,memory.used,utilization.gpu,pcie.link.gen.max,pcie.link.width.max,driver_version --format=csv
step a3-nvml-lib 10 sh -c 'ldconfig -p | grep -i nvidia-ml; ls -l /usr/lib/x86_64-linux-gnu/libnvidia-ml* /usr/local/nvidia/lib64/libnvidia-ml* 2>&1; echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"'
step a4-torch 40 "$PY" -c 'import torch; print(torch.__version__, torch.cuda.is_available(), torch.cuda.get_device_name(0))'
# `profile run` opens NVML before it starts the command: its first line names the GPU.
step a5-dqngpu-nvml 20 "$DQN" profile run --app probe --interval-ms 200 -o "$WORK/probe.json" -- sleep 1

# ---- d. Rust tests that need a GPU (ignored in CI), prebuilt
step d1-profiler-gpu-tests 60 "$BIN/profiler-gpu-test" --ignored --test-threads 1 --nocapture
step d2-service-gpu-tests 30 "$BIN/service-gpu-test" --ignored --test-threads 1 --nocapture

# ---- b. `profile run` of a real CUDA workload in phases
PH=$WORK/phases.jsonl
step b1-profile-run $((WORKLOAD_S + 50)) "$DQN" profile run --app gpu_workload --kind ml --interval-ms 250 \
    --params "seconds=$WORKLOAD_S" -o "$OUT/profile.json" -- "$PY" "$ROOT/scripts/gpu_workload.py" \
    --seconds "$WORKLOAD_S" --phases "$PH"
log "phases: $(cat "$PH" 2>&1 | tr '\n' ' ')"
step b2-profile-phases 20 "$PY" "$ROOT/scripts/gpu_workload.py" --analyse "$OUT/profile.json" --phases "$PH" \
    --report "$OUT/profile_report.json"
step b3-profile-show 20 "$DQN" profile show "$OUT/profile.json" --png "$OUT/profile.png"

# ---- c. the service with its local executor on the real GPU
DATA=$WORK/data
start_server() {
    log "--- starting dqngpu serve on $URL, data dir $DATA"
    # shellcheck disable=SC2086
    "$DQN" serve --listen "127.0.0.1:$PORT" --data-dir "$DATA" --tick-ms 500 $SERVE_ARGS >>"$LOG" 2>&1 &
    SERVER_PID=$!
    step "$1" 30 "$PY" "$H" wait "$URL/healthz" 25 "$SERVER_PID"
}
# submit SECONDS: prints the new job's id. The job is the workload for SECONDS, or $JOB_CMD SECONDS.
submit() {
    local cmd
    if [ -n "$JOB_CMD" ]; then
        read -r -a cmd <<<"$JOB_CMD"
        cmd+=("$1")
    else
        cmd=("$PY" "$ROOT/scripts/gpu_workload.py" --big-gib 4 --seconds "$1")
    fi
    timeout 15 "$DQN" submit --server "$URL" --app gpu_workload -- "${cmd[@]}" 2>>"$LOG"
}
if start_server c1-serve-up; then
    step c2-cluster 10 "$PY" "$H" get "$URL/v1/cluster"
    # The app has no profile: the first job runs alone on an idle GPU and its run becomes the
    # observed profile (NVML samples); the others are then placed by the policy.
    IDS=
    for k in 1 2 3; do
        id=$(submit "$JOB_S")
        log "submitted job $k: id '${id}'"
        IDS="$IDS $id"
    done
    # shellcheck disable=SC2086
    step c3-jobs-finish 120 "$PY" "$H" poll "$URL" 110 $IDS
    step c4-jobs-table 10 "$DQN" jobs --server "$URL"
    for id in $IDS; do step "c5-job-$id" 10 "$DQN" job "$id" --server "$URL" --logs; done
    step c6-dump 15 sh -c "'$PY' '$H' dump '$URL' >'$OUT/service_before.json'"
    step c6b-observed-profile 10 "$PY" "$H" observed "$URL" gpu_workload
    step c7-metrics 10 sh -c "{ echo '# before kill -9'; '$PY' '$H' get '$URL/metrics'; } >>'$OUT/metrics.txt'"
    # A job running when the server dies must survive it: its supervisor outlives the server.
    LONG=$(submit $((JOB_S * 2)))
    log "submitted job 4 (runs across the restart): id '$LONG'"
    for _ in $(seq 1 40); do
        [ "$("$PY" "$H" state "$URL" "$LONG" 2>/dev/null)" = running ] && break
        sleep 0.5
    done
    log "job $LONG is $("$PY" "$H" state "$URL" "$LONG" 2>&1) before kill -9 of the server (pid $SERVER_PID)"
    kill -KILL "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
    SERVER_PID=
    if start_server c8-serve-restart; then
        step c9-jobs-after-restart 10 "$DQN" jobs --server "$URL"
        step c10-long-job-finishes 60 "$PY" "$H" poll "$URL" 50 "$LONG"
        step c11-dump 15 sh -c "'$PY' '$H' dump '$URL' >'$OUT/service_after.json'"
        step c12-state-survived 10 "$PY" "$H" survived "$URL" "$OUT/service_before.json" "${LONG:-0}"
        step c13-metrics 10 sh -c "{ echo '# after restart'; '$PY' '$H' get '$URL/metrics'; } >>'$OUT/metrics.txt'"
    fi
    if [ -n "$SERVER_PID" ]; then
        kill -TERM "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
        SERVER_PID=
    fi
fi

log "=== summary ($(($(date +%s) - T0))s in all)"
tee -a "$LOG" <"$SUMMARY"
! grep -qv '^PASS' "$SUMMARY"
