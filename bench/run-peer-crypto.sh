#!/bin/sh
# The cost of peer link security: 64 MiB remote ivmSyncPut / ivmSyncGet over
# authenticated links (the default) and encrypted ones (--peer-encrypt), beside
# raw TCP (bench-tcp-baseline: the same bytes in one send/recv stream), in the
# same rounds. Builds nothing.
#   bench/run-peer-crypto.sh [BUILD_DIR (build)]
# Environment: ROUNDS (5), REPS (10 timed calls per size and run).
# Prints per round the MB/s of each, then the median, min and max of each over
# the rounds and the ratios to TCP, with the load average at the start and end.
set -eu

build=${1:-${BUILD_DIR:-build}}
for prog in ivmrun bench-sync-remote bench-tcp-baseline; do
    if [ ! -x "$build/bin/$prog" ]; then
        echo "run-peer-crypto.sh: $build/bin/$prog not found; build first" >&2
        exit 1
    fi
done
rounds=${ROUNDS:-5}
args="-s 64 -l 200 -w 20 -r ${REPS:-10}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ivm-peer-crypto.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
load0=$(cut -d' ' -f1-3 /proc/loadavg)

# bw LOG TAG: "put get" MB/s of the 64 MiB row.
bw() {
    awk -v tag="$2" '$1 == "RESULT" && $2 == tag && $3 == "bytes=67108864" {
        for (i = 4; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        print v["put_MBps"], v["get_MBps"] }' "$1"
}

r=1
while [ "$r" -le "$rounds" ]; do
    for variant in auth encrypt tcp; do
        log=$tmp/$variant.$r
        case $variant in
            auth) "$build/bin/ivmrun" --nodes 2 --timeout 600 "$build/bin/bench-sync-remote" \
                      $args >"$log" 2>&1 ;;
            encrypt) "$build/bin/ivmrun" --nodes 2 --timeout 600 --peer-encrypt \
                         "$build/bin/bench-sync-remote" $args >"$log" 2>&1 ;;
            tcp) "$build/bin/bench-tcp-baseline" $args -c 0 >"$log" 2>&1 ;;
        esac || { cat "$log"; echo "run-peer-crypto.sh: $variant run failed" >&2; exit 1; }
        tag=sync_remote_bw
        [ "$variant" = tcp ] && tag=tcp_bw
        echo "$variant $(bw "$log" "$tag")" >>"$tmp/all"
    done
    echo "round $r: $(grep -c . "$tmp/all") runs, load $(cut -d' ' -f1 /proc/loadavg)"
    r=$((r + 1))
done
echo
echo "64 MiB remote Put/Get, MB/s (10^6 B/s): median [min, max] of $rounds rounds"
echo "load average: $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
awk '
function med(a, n,    i, j, t) {
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ n[$1]++; put[$1, n[$1]] = $2; get[$1, n[$1]] = $3 }
END {
    printf "%-8s %28s %28s\n", "", "put", "get"
    split("auth encrypt tcp", vs, " ")
    for (k = 1; k <= 3; k++) {
        v = vs[k]; m = n[v]
        for (i = 1; i <= m; i++) { p[i] = put[v, i]; g[i] = get[v, i] }
        mp[v] = med(p, m); mg[v] = med(g, m)
        printf "%-8s %10.0f [%6.0f, %6.0f] %10.0f [%6.0f, %6.0f]\n", v, mp[v], p[1], p[m],
            mg[v], g[1], g[m]
    }
    printf "ratio to TCP: auth put %.2f get %.2f; encrypt put %.2f get %.2f\n",
        mp["auth"] / mp["tcp"], mg["auth"] / mg["tcp"], mp["encrypt"] / mp["tcp"],
        mg["encrypt"] / mg["tcp"]
    printf "RESULT peer_crypto auth_put=%.2f auth_get=%.2f encrypt_put=%.2f encrypt_get=%.2f\n",
        mp["auth"] / mp["tcp"], mg["auth"] / mg["tcp"], mp["encrypt"] / mp["tcp"],
        mg["encrypt"] / mg["tcp"]
}' "$tmp/all"
