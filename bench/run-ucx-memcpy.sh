#!/bin/sh
# Issue 14's bandwidth target: a 64 MiB ivmSyncPut (and Get) between two
# simulated nodes over UCX's shared memory against a memcpy of 64 MiB on the
# same machine, in pairs run one after the other. Builds nothing.
#   bench/run-ucx-memcpy.sh [BUILD_DIR (build)]
# Each pair: UCX_TLS=sm,self ivmrun --nodes 2 --transport ucx bench-sync-remote
# -s 64 -l 200 -w 20 -r 10 (its 64 MiB row) and bench-limits (memcpy_MBps).
# Prints each pair, then the median (min-max) over the pairs of Put/memcpy
# and Get/memcpy, with the load average at the start and the end.
# Environment: PAIRS (5), EXTRA_ENV (e.g. "UCX_MM_FIFO_SIZE=64
# UCX_MM_SEG_SIZE=8256": UCX's own FIFO instead of ivmd's).
set -eu
build=${1:-${BUILD_DIR:-build}}
pairs=${PAIRS:-5}
for prog in "$build/bin/ivmrun" "$build/bin/bench-sync-remote" "$build/bin/bench-limits"; do
    if [ ! -x "$prog" ]; then
        echo "run-ucx-memcpy.sh: $prog not found; build first (cmake --build $build)" >&2
        exit 1
    fi
done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
load0=$(cut -d' ' -f1 /proc/loadavg)
i=1
while [ "$i" -le "$pairs" ]; do
    bw=$(env ${EXTRA_ENV:-} UCX_TLS=sm,self "$build/bin/ivmrun" --nodes 2 --transport ucx \
        "$build/bin/bench-sync-remote" -s 64 -l 200 -w 20 -r 10 2>&1 |
        sed -n 's/^RESULT sync_remote_bw bytes=67108864 put_MBps=\([0-9.]*\) get_MBps=\([0-9.]*\).*/\1 \2/p')
    mc=$("$build/bin/bench-limits" 2>&1 | sed -n 's/^RESULT limits memcpy_MBps=\([0-9.]*\).*/\1/p')
    if [ -z "$bw" ] || [ -z "$mc" ]; then
        echo "run-ucx-memcpy.sh: pair $i printed no figure (UCX missing?)" >&2
        exit 1
    fi
    echo "$i $bw $mc" >>"$out"
    i=$((i + 1))
done
load1=$(cut -d' ' -f1 /proc/loadavg)
awk -v l0="$load0" -v l1="$load1" '
function med(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ n++; p[n] = $2 / $4; g[n] = $3 / $4; pp[n] = p[n]; gg[n] = g[n]
  printf "pair %d: Put %.0f MB/s, Get %.0f MB/s, memcpy %.0f MB/s: Put/memcpy %.2f, Get/memcpy %.2f\n", $1, $2, $3, $4, p[n], g[n] }
END {
    mp = med(pp, n); mg = med(gg, n)
    printf "Put/memcpy %.2f (%.2f-%.2f), Get/memcpy %.2f (%.2f-%.2f) over %d pairs; load average %s at the start, %s at the end\n", mp, pp[1], pp[n], mg, gg[1], gg[n], n, l0, l1
    printf "RESULT ucx_memcpy put_ratio=%.3f put_min=%.3f put_max=%.3f get_ratio=%.3f pairs=%d target=0.8 pass=%s\n", mp, pp[1], pp[n], mg, n, (mp >= 0.8 ? "yes" : "no")
}' "$out"
