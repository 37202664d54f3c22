#!/usr/bin/env bash
# Node-to-node syncs of two builds side by side (e.g. before and after a
# change of the daemon), in the same run, alternating which goes first:
#   bench/run-ab-remote.sh OLD_BUILD_DIR NEW_BUILD_DIR
# Each round runs ivmrun --nodes 2 bench-sync-remote of each build (PE on
# node1, master on node0) and takes its 8 B Put/Get median latency and its
# MAX_MIB Put/Get bandwidth. Prints, per figure, the median, min and max over
# the rounds for both builds, and the median of the per-round ratios new/old
# (latency: old/new, so that above 1 is better for both), with the load
# average at the start and the end.
# Environment: ROUNDS (5), MAX_MIB (64), LAT_CALLS (2000), WARMUP (200), REPS (10).
set -euo pipefail
if (($# != 2)); then
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
fi
old=$1 new=$2
for b in "$old" "$new"; do
    for prog in ivmrun bench-sync-remote; do
        [[ -x $b/bin/$prog ]] || { echo "run-ab-remote.sh: $b/bin/$prog not found" >&2; exit 1; }
    done
done
rounds=${ROUNDS:-5}
mib=${MAX_MIB:-64}
bytes=$((mib * 1024 * 1024))
args=(-s "$mib" -l "${LAT_CALLS:-2000}" -w "${WARMUP:-200}" -r "${REPS:-10}")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ivm-ab.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# run BUILD TAG ROUND: one run, its four figures appended to $tmp/TAG.
run() {
    local out=$tmp/$2.$3.out
    "$1/bin/ivmrun" --nodes 2 --timeout 600 "$1/bin/bench-sync-remote" "${args[@]}" >"$out" 2>&1 ||
        { cat "$out"; echo "run-ab-remote.sh: the $2 run failed" >&2; exit 1; }
    awk -v bytes="$bytes" '
        /RESULT sync_remote_lat/ { for (i = 1; i <= NF; i++) { split($i, kv, "=");
                                   if (kv[1] == "put_median_us") pl = kv[2];
                                   if (kv[1] == "get_median_us") gl = kv[2] } }
        /RESULT sync_remote_bw/ && $0 ~ "bytes=" bytes " " {
                                   for (i = 1; i <= NF; i++) { split($i, kv, "=");
                                   if (kv[1] == "put_MBps") pb = kv[2];
                                   if (kv[1] == "get_MBps") gb = kv[2] } }
        END { print pl, gl, pb, gb }' "$out" >>"$tmp/$2"
}

load0=$(cut -d' ' -f1 /proc/loadavg)
for ((r = 1; r <= rounds; r++)); do
    if ((r % 2)); then run "$old" old "$r"; run "$new" new "$r"
    else run "$new" new "$r"; run "$old" old "$r"; fi
    echo "round $r: old $(sed -n "${r}p" "$tmp/old")  new $(sed -n "${r}p" "$tmp/new")"
done
load1=$(cut -d' ' -f1 /proc/loadavg)
paste -d' ' "$tmp/old" "$tmp/new" | awk -v mib="$mib" -v l0="$load0" -v l1="$load1" '
    function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                                    if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    function mn(a, n,   i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] < m) m = a[i]; return m }
    function mx(a, n,   i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] > m) m = a[i]; return m }
    { n++; for (f = 1; f <= 4; f++) { o[f, n] = $f; w[f, n] = $(f + 4);
                                      q[f, n] = f <= 2 ? $f / $(f + 4) : $(f + 4) / $f } }
    END {
        split("8 B Put (us)|8 B Get (us)|" mib " MiB Put (MB/s)|" mib " MiB Get (MB/s)", name, "|")
        printf "| figure | old median (min-max) | new median (min-max) | new vs old, median of rounds (min-max) |\n"
        printf "| --- | --- | --- | --- |\n"
        for (f = 1; f <= 4; f++) {
            for (i = 1; i <= n; i++) { a[i] = o[f, i]; b[i] = w[f, i]; c[i] = q[f, i] }
            printf "| %s | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.2fx (%.2f-%.2f) |\n", name[f],
                   med(a, n), mn(a, n), mx(a, n), med(b, n), mn(b, n), mx(b, n),
                   med(c, n), mn(c, n), mx(c, n)
        }
        printf "\n%d rounds; load average %s at the start, %s at the end; above 1x: new is better\n", n, l0, l1
    }'
