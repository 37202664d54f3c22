#!/bin/sh
# DPC share of a DS-LB run (issue 6): NBODY with 64 PEs over the run
# (8 portions x 8 iterations) on 2 simulated nodes, cold (no pool) and with a
# warm pool, ROUNDS (3) runs each, alternating. Prints each run's DPC line
# (apps/common/dslb.c, --dpc: every PE's latency from its creator's
# ivmCreatePEs to its ivmEnter returning) and the medians. Builds nothing.
#   bench/run-dpc-share.sh [BUILD_DIR (build)]
# Environment: ROUNDS (3), SIZE (16384 bodies), POOL (2), PORTIONS (8),
# ITERS (8). The target (share under 1%) is judged on share, the upper bound.
#   share        sum of the latencies / the computation's wall-clock (an upper
#                bound: as if no creation overlapped another or any work)
#   chain_share  share / chains running at once (devices x max-per-dev): the
#                part of each DS-LB chain's time spent waiting for its next PE
set -eu

build=${1:-${BUILD_DIR:-build}}
for prog in "$build/bin/ivmrun" "$build/bin/nbody"; do
    if [ ! -x "$prog" ]; then
        echo "run-dpc-share.sh: $prog not found; build first (cmake --build $build)" >&2
        exit 1
    fi
done
rounds=${ROUNDS:-3}
logs=$(mktemp -d "${TMPDIR:-/tmp}/ivm-dpc-share.XXXXXX")
trap 'rm -rf "$logs"' EXIT
r=1
while [ "$r" -le "$rounds" ]; do
    for pool in 0 "${POOL:-2}"; do
        "$build/bin/ivmrun" --nodes 2 --pe-pool "$pool" --timeout 600 "$build/bin/nbody" \
            --dpc --size "${SIZE:-16384}" --portions "${PORTIONS:-8}" --iters "${ITERS:-8}" \
            >"$logs/run.$pool.$r" 2>&1 ||
            { cat "$logs/run.$pool.$r"; echo "run-dpc-share.sh: run failed" >&2; exit 1; }
        line=$(grep '^DPC ' "$logs/run.$pool.$r")
        echo "pool=$pool $line"
        echo "$line" >>"$logs/dpc.$pool"
    done
    r=$((r + 1))
done
for pool in 0 "${POOL:-2}"; do
    awk -v pool="$pool" '
    function med(a, n,    i, j, t) {
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1], NR] = kv[2] } ; n = NR }
    END {
        for (k = 1; k <= n; k++) { a[k] = v["median_ms", k]; b[k] = v["sum_ms", k]; c[k] = v["seconds", k];
                                   d[k] = v["share", k]; e[k] = v["chain_share", k]; pes = v["pes", k] }
        printf "RESULT dpc_share pool=%s pes=%s rounds=%d median_ms=%.3f sum_ms=%.1f seconds=%.3f share=%.4f chain_share=%.4f target=0.01 pass=%s\n",
            pool, pes, n, med(a, n), med(b, n), med(c, n), med(d, n), med(e, n), med(d, n) < 0.01 ? "yes" : "no"
    }' "$logs/dpc.$pool"
done
