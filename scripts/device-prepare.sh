#!/usr/bin/env bash
# Builds what scripts/device-gpu-check.sh runs on the GPU machine (which has no Rust) and puts
# it, stripped, into .devbin/ (ignored by git; carry it to the device run):
#   .devbin/dqngpu             the release binary
#   .devbin/profiler-gpu-test  crates/profiler/tests/gpu.rs, release
#   .devbin/service-gpu-test   crates/service/tests/gpu.rs, release
# Prints each size and the total, and fails when the total is 50 MiB or more.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
DEST=$ROOT/.devbin
LIMIT=$((50 * 1024 * 1024))

if [ "$(uname -m)" != x86_64 ]; then
    echo "error: this machine is $(uname -m); the GPU machine is x86_64, so these builds would not run there" >&2
    exit 1
fi
grep -qx '/.devbin/' .git/info/exclude 2>/dev/null || echo '/.devbin/' >>.git/info/exclude

# test_binary PACKAGE TEST: builds the integration test TEST of PACKAGE and prints its path.
test_binary() {
    cargo test --release -p "$1" --test "$2" --no-run --message-format=json \
        | python3 -c '
import json, sys
exe = [m["executable"] for m in map(json.loads, sys.stdin)
       if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]]
if not exe:
    sys.exit(f"no test executable for target {sys.argv[1]} in cargo output")
print(exe[-1])' "$2"
}

echo "building the release binary ..." >&2
cargo build --release -p dqngpu
echo "building the GPU test binaries ..." >&2
prof_test=$(test_binary dqngpu-profiler gpu)
svc_test=$(test_binary dqngpu-service gpu)

mkdir -p "$DEST"
strip_to() {
    if command -v strip >/dev/null; then
        strip -o "$2" "$1"
    else
        objcopy --strip-debug "$1" "$2"
    fi
}
strip_to target/release/dqngpu "$DEST/dqngpu"
strip_to "$prof_test" "$DEST/profiler-gpu-test"
strip_to "$svc_test" "$DEST/service-gpu-test"
chmod +x "$DEST"/*

total=0
for f in "$DEST"/*; do
    n=$(stat -c %s "$f")
    total=$((total + n))
    printf '%8.1f MiB  %s\n' "$(awk -v n="$n" 'BEGIN{print n/1048576}')" "$f"
done
printf '%8.1f MiB  total (limit 50 MiB)\n' "$(awk -v n="$total" 'BEGIN{print n/1048576}')"
if [ "$total" -ge "$LIMIT" ]; then
    echo "error: .devbin is $total bytes, over the 50 MiB limit" >&2
    exit 1
fi
