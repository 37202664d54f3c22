#!/usr/bin/env bash
# Peak memory of the daemons during big node-to-node transfers:
#   bench/run-hwm.sh [BUILD_DIR (build)] [MIB (4096)]
# Runs ivmrun --nodes 2 bench-sync-remote up to MIB MiB (the PE on node1
# maps the object, a mirror fill of MIB MiB from node0, then Puts and Gets
# it) and samples each daemon's /proc status every 0.1 s: its resident memory
# at the first sample (idle) and its VmHWM (peak) at the last. Needs about
# 2 x MIB MiB of /dev/shm and memory.
set -euo pipefail
build=${1:-build}
mib=${2:-4096}
out=$(mktemp "${TMPDIR:-/tmp}/ivm-hwm.XXXXXX")
trap 'rm -f "$out"' EXIT
"$build/bin/ivmrun" --nodes 2 --timeout 900 "$build/bin/bench-sync-remote" -s "$mib" -l 10 \
    -w 2 -r 1 -o both >"$out" 2>&1 &
launcher=$!
declare -A first peak
while kill -0 "$launcher" 2>/dev/null; do
    for p in $(pgrep -x ivmd -P "$launcher" || true); do
        rss=$(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
        hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
        [[ -n $rss && -n $hwm ]] || continue
        [[ -n ${first[$p]:-} ]] || first[$p]=$rss
        peak[$p]=$hwm
    done
    sleep 0.1
done
rc=0
wait "$launcher" || rc=$?
for p in "${!peak[@]}"; do
    echo "ivmd pid $p: idle $((first[$p] / 1024)) MiB, peak (VmHWM) $((peak[$p] / 1024)) MiB," \
         "+$(((peak[$p] - first[$p]) / 1024)) MiB moving $mib MiB"
done
grep -E "first_map_ms|check" "$out" || true
if ((rc != 0)); then
    cat "$out"
    echo "run-hwm.sh: the run failed (exit $rc)" >&2
    exit 1
fi
