#!/bin/sh
# Node-to-node sync benchmark and its baselines, side by side. Builds nothing.
#   bench/run-remote.sh [BUILD_DIR (build)]
# Runs ROUNDS rounds of, in turn:
#   IVM:  ivmrun --nodes 2 bench-sync-remote   (PE on node1, master on node0)
#   IVM, polling daemons: the same with --daemon-poll-us DAEMON_POLL_US (30;
#         0 skips it): each daemon polls that long for the next message after
#         it answers a PE or while a transfer is in flight, as MPI ranks poll
#   TCP:  bench-tcp-baseline                   (two processes, loopback TCP)
#   MPI:  mpirun ... bench-mpi-rma             (MPI_Put/Get + MPI_Win_flush,
#         osc pt2pt over pml ob1 over btl tcp; skipped when bench-mpi-rma or
#         mpirun is missing)
#   and for each UCX_TLS value T of UCX_ROWS ("sm,self tcp,self"; empty:
#   none; skipped when ivmd was built without UCX):
#   IVM over UCX: ivmrun --nodes 2 --transport ucx bench-sync-remote, UCX_TLS=T
#   MPI over UCX: mpirun ... --mca osc ucx bench-mpi-rma, UCX_TLS=T
# and prints, per figure, the median over the rounds of each run's median,
# then the ratios and RESULT lines; the UCX rows also with the min and max
# over the rounds and the load average at the start and the end.
# Environment: ROUNDS (5), MAX_MIB (64), LAT_CALLS (2000), WARMUP (200),
# REPS (10), DAEMON_POLL_US (30), TCP_CHUNK_KIB (0: whole transfers in one send/recv call),
# UCX_ROWS, MPIRUN (mpirun), KEEP_LOGS (a directory to keep the raw outputs in).
set -eu

build=${1:-${BUILD_DIR:-build}}
ivmrun=$build/bin/ivmrun
for prog in "$ivmrun" "$build/bin/bench-sync-remote" "$build/bin/bench-tcp-baseline"; do
    if [ ! -x "$prog" ]; then
        echo "run-remote.sh: $prog not found; build first (cmake --build $build)" >&2
        exit 1
    fi
done
rounds=${ROUNDS:-5}
poll_us=${DAEMON_POLL_US:-30}
args="-s ${MAX_MIB:-64} -l ${LAT_CALLS:-2000} -w ${WARMUP:-200} -r ${REPS:-10}"
mpirun=${MPIRUN:-mpirun}
have_mpi=no
if [ -x "$build/bin/bench-mpi-rma" ] && command -v "$mpirun" >/dev/null 2>&1; then
    have_mpi=yes
else
    echo "run-remote.sh: no bench-mpi-rma or no $mpirun: the MPI column stays empty" >&2
fi

# UCX rows only when this build's ivmd has UCX (ivmd --help names the
# transport option either way; the library is what tells).
ucx_rows=${UCX_ROWS-"sm,self tcp,self"}
if [ -n "$ucx_rows" ] && ! ldd "$build/bin/ivmd" 2>/dev/null | grep -q libucp; then
    echo "run-remote.sh: $build/bin/ivmd has no UCX: the UCX rows stay empty" >&2
    ucx_rows=
fi
load0=$(cut -d' ' -f1 /proc/loadavg)

logs=${KEEP_LOGS:-}
if [ -z "$logs" ]; then
    logs=$(mktemp -d "${TMPDIR:-/tmp}/ivm-run-remote.XXXXXX")
    trap 'rm -rf "$logs"' EXIT
else
    mkdir -p "$logs"
fi

# ivm_run LOG [IVMRUN OPTIONS...]: one IVM run into LOG, or exit.
ivm_run() {
    log=$1
    shift
    # shellcheck disable=SC2086
    "$ivmrun" --nodes 2 --timeout 600 "$@" "$build/bin/bench-sync-remote" $args >"$log" 2>&1 ||
        { cat "$log"; echo "run-remote.sh: IVM run ($*) failed" >&2; exit 1; }
}

r=1
while [ "$r" -le "$rounds" ]; do
    echo "== round $r of $rounds =="
    ivm_run "$logs/ivm.$r"
    if [ "$poll_us" != 0 ]; then
        ivm_run "$logs/ivmpoll.$r" --daemon-poll-us "$poll_us"
        sed -i 's/^RESULT sync_remote/RESULT pollsync_remote/' "$logs/ivmpoll.$r"
    fi
    # shellcheck disable=SC2086
    "$build/bin/bench-tcp-baseline" $args -c "${TCP_CHUNK_KIB:-0}" >"$logs/tcp.$r" 2>&1 ||
        { cat "$logs/tcp.$r"; echo "run-remote.sh: TCP baseline failed" >&2; exit 1; }
    if [ "$have_mpi" = yes ]; then
        # shellcheck disable=SC2086
        timeout 600 "$mpirun" --allow-run-as-root --oversubscribe -np 2 --mca osc pt2pt \
            --mca pml ob1 --mca btl self,tcp "$build/bin/bench-mpi-rma" $args \
            >"$logs/mpi.$r" 2>&1 ||
            { cat "$logs/mpi.$r"; echo "run-remote.sh: MPI baseline failed" >&2; exit 1; }
    fi
    # Each UCX row's RESULT tags get the prefix ucx_TAG_ (TAG: T's first
    # transport), so that the one awk below keeps them apart.
    for tls in $ucx_rows; do
        tag=ucx_$(echo "$tls" | sed 's/,.*//; s/[^A-Za-z0-9]/_/g')
        (export UCX_TLS="$tls"; ivm_run "$logs/$tag.$r" --transport ucx) || exit 1
        sed -i "s/^RESULT /RESULT ${tag}_/" "$logs/$tag.$r"
        if [ "$have_mpi" = yes ]; then
            # osc_ucx_tls/devices any: without them osc ucx refuses sm/tcp
            # lanes here and OSHMEM/osc ucx hang in finalize.
            # shellcheck disable=SC2086
            timeout 600 "$mpirun" --allow-run-as-root --oversubscribe -np 2 --mca osc ucx \
                --mca osc_ucx_tls any --mca osc_ucx_devices any --mca pml ob1 \
                --mca btl self,tcp -x UCX_TLS="$tls" "$build/bin/bench-mpi-rma" $args \
                >"$logs/mpi$tag.$r" 2>&1 ||
                { cat "$logs/mpi$tag.$r"; echo "run-remote.sh: MPI osc ucx ($tls) failed" >&2; exit 1; }
            sed -i "s/^RESULT /RESULT mpi${tag}_/" "$logs/mpi$tag.$r"
        fi
        grep -h '^RESULT' "$logs/$tag.$r" "$logs/mpi$tag.$r" 2>/dev/null | sed "s/^/  /"
    done
    if [ "$have_mpi" = yes ]; then
        grep -h '^RESULT' "$logs/ivm.$r" "$logs"/ivmpoll."$r"* "$logs/tcp.$r" "$logs/mpi.$r" 2>/dev/null | sed "s/^/  /"
    else
        grep -h '^RESULT' "$logs/ivm.$r" "$logs"/ivmpoll."$r"* "$logs/tcp.$r" 2>/dev/null | sed "s/^/  /"
    fi
    r=$((r + 1))
done
echo
echo "== last round's tables =="
cat "$logs/ivm.$rounds" "$logs/tcp.$rounds"
[ "$have_mpi" = yes ] && cat "$logs/mpi.$rounds"
echo
load1=$(cut -d' ' -f1 /proc/loadavg)

# Every RESULT line of every round -> "key value" pairs, then medians per key.
cat "$logs"/*.[0-9]* | awk -v rounds="$rounds" -v have_mpi="$have_mpi" -v poll_us="$poll_us" \
    -v ucx_rows="$ucx_rows" -v load0="$load0" -v load1="$load1" '
# sorted(key, v): the values of key, sorted into v; their count.
function sorted(key, v,    n, i, j, t) {
    n = cnt[key]
    for (i = 1; i <= n; i++) v[i] = vals[key, i]
    for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
    return n
}
function median(key,    n, v) {
    n = sorted(key, v)
    if (n == 0) return -1
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
# "median (min-max)" of key.
function mmm(key, f,    n, v) {
    n = sorted(key, v)
    if (n == 0) return "n/a"
    return sprintf(f " (" f "-" f ")", median(key), v[1], v[n])
}
# The UCX rows: per UCX_TLS value, IVM over UCX beside MPI osc ucx.
function ucx_table(    nt, tl, i, t, k, m, fig, name, unit, key, f, a, b, tc) {
    nt = split(ucx_rows, tl, " ")
    if (nt == 0) return
    printf "\n== UCX rows: median (min-max) over %d rounds of each run'"'"'s median; load average %s at the start, %s at the end ==\n", rounds, load0, load1
    printf "IVM: ivmrun --transport ucx; MPI: osc ucx (pml ob1); both with the UCX_TLS given; IVM tcp: the rows above\n"
    printf "%-9s %-16s %24s %24s %8s %10s\n", "UCX_TLS", "figure", "IVM ucx", "MPI osc ucx", "IVM/MPI", "IVM tcp"
    split("lat.put_median_us|lat.get_median_us|bw.67108864.put_MBps|bw.67108864.get_MBps", key, "|")
    split("8 B put, us|8 B get, us|64 MiB put, MB/s|64 MiB get, MB/s", name, "|")
    for (i = 1; i <= nt; i++) {
        t = tl[i]; sub(/,.*/, "", t); gsub(/[^A-Za-z0-9]/, "_", t); t = "ucx_" t
        for (k = 1; k <= 4; k++) {
            f = k <= 2 ? "%.1f" : "%.0f"
            a = median(t "_sync_remote_" key[k]); b = median("mpi" t "_mpi_" key[k])
            tc = median("sync_remote_" key[k])
            printf "%-9s %-16s %24s %24s %8s %10s\n", tl[i], name[k], mmm(t "_sync_remote_" key[k], f),
                mmm("mpi" t "_mpi_" key[k], f), fmt(k <= 2 ? ratio(a, b) : ratio(b, a), "%.2f"), fmt(tc, f)
            m = k <= 2 ? "us" : "MBps"
            fig = key[k]; sub(/^lat\./, "", fig); sub(/^bw\.67108864\./, "bw64_", fig)
            ucxres = ucxres sprintf("RESULT remote_ucx tls=%s figure=%s ivm=%s ivm_min=%s ivm_max=%s mpi=%s ivm_tcp=%s ivm_over_mpi=%s\n",
                tl[i], fig, fmt(a, "%.2f"), fmt(minv(t "_sync_remote_" key[k]), "%.2f"),
                fmt(maxv(t "_sync_remote_" key[k]), "%.2f"), fmt(b, "%.2f"), fmt(tc, "%.2f"), fmt(ratio(a, b), "%.3f"))
        }
    }
    printf "(IVM/MPI: time over time for latency, MPI over IVM for bandwidth: above 1 is IVM slower)\n"
    printf "%s", ucxres
}
function minv(key,    n, v) { n = sorted(key, v); return n ? v[1] : -1 }
function maxv(key,    n, v) { n = sorted(key, v); return n ? v[n] : -1 }
function add(key, val) { cnt[key]++; vals[key, cnt[key]] = val }
function fmt(x, f) { return x < 0 ? "n/a" : sprintf(f, x) }
function ratio(a, b) { return (a < 0 || b <= 0) ? -1 : a / b }
/^RESULT / {
    tag = $2; bytes = ""
    for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "bytes") bytes = kv[2] }
    if (bytes != "" && tag ~ /_bw$/) sizes[bytes] = 1
    for (i = 3; i <= NF; i++) {
        split($i, kv, "=")
        if (kv[1] == "bytes" || kv[1] == "calls") continue
        add(tag (bytes != "" ? "." bytes : "") "." kv[1], kv[2])
    }
}
END {
    printf "== IVM vs TCP vs MPI: median over %d rounds of each run'"'"'s median ==\n", rounds
    printf "8-byte latency, us per blocking call (TCP: one 8-byte round trip)\n"
    printf "%-6s %10s %10s %10s %10s %10s\n", "", "IVM", "TCP_rtt", "MPI", "IVM/MPI", "IVM/TCP"
    ip = median("sync_remote_lat.put_median_us"); ig = median("sync_remote_lat.get_median_us")
    tr = median("tcp_lat.rtt_median_us")
    mp = median("mpi_lat.put_median_us"); mg = median("mpi_lat.get_median_us")
    printf "%-6s %10s %10s %10s %10s %10s\n", "put", fmt(ip, "%.1f"), fmt(tr, "%.1f"),
        fmt(mp, "%.1f"), fmt(ratio(ip, mp), "%.2f"), fmt(ratio(ip, tr), "%.2f")
    printf "%-6s %10s %10s %10s %10s %10s\n", "get", fmt(ig, "%.1f"), fmt(tr, "%.1f"),
        fmt(mg, "%.1f"), fmt(ratio(ig, mg), "%.2f"), fmt(ratio(ig, tr), "%.2f")
    qp = median("pollsync_remote_lat.put_median_us"); qg = median("pollsync_remote_lat.get_median_us")
    if (qp >= 0) {
        printf "%-6s %10s %10s %10s %10s %10s   (IVM with --daemon-poll-us %s)\n", "put", fmt(qp, "%.1f"),
            fmt(tr, "%.1f"), fmt(mp, "%.1f"), fmt(ratio(qp, mp), "%.2f"), fmt(ratio(qp, tr), "%.2f"), poll_us
        printf "%-6s %10s %10s %10s %10s %10s   (IVM with --daemon-poll-us %s)\n", "get", fmt(qg, "%.1f"),
            fmt(tr, "%.1f"), fmt(mg, "%.1f"), fmt(ratio(qg, mg), "%.2f"), fmt(ratio(qg, tr), "%.2f"), poll_us
    }
    lr = median("sync_remote_ref.local_rtt_median_us"); fr = median("sync_remote_ref.forward_rtt_median_us")
    printf "IVM reference round trips without data: PE<->node daemon %s us, PE->node1->node0 daemon and back %s us\n",
        fmt(lr, "%.1f"), fmt(fr, "%.1f")
    printf "\nbandwidth, MB/s (10^6 B/s) per blocking call\n"
    printf "%-10s %9s %9s %9s %8s   %9s %9s %9s %8s\n", "bytes", "IVM_put", "TCP_put", "MPI_put",
        "IVM/TCP", "IVM_get", "TCP_get", "MPI_get", "IVM/TCP"
    n = 0
    for (s in sizes) order[++n] = s + 0
    for (i = 2; i <= n; i++) { t = order[i]; for (j = i - 1; j >= 1 && order[j] > t; j--) order[j + 1] = order[j]; order[j + 1] = t }
    for (i = 1; i <= n; i++) {
        s = order[i]
        if (cnt["sync_remote_bw." s ".put_MBps"] == 0 && cnt["tcp_bw." s ".put_MBps"] == 0) continue
        a = median("sync_remote_bw." s ".put_MBps"); b = median("tcp_bw." s ".put_MBps"); c = median("mpi_bw." s ".put_MBps")
        d = median("sync_remote_bw." s ".get_MBps"); e = median("tcp_bw." s ".get_MBps"); f = median("mpi_bw." s ".get_MBps")
        printf "%-10d %9s %9s %9s %8s   %9s %9s %9s %8s\n", s, fmt(a, "%.0f"), fmt(b, "%.0f"), fmt(c, "%.0f"),
            fmt(ratio(a, b), "%.2f"), fmt(d, "%.0f"), fmt(e, "%.0f"), fmt(f, "%.0f"), fmt(ratio(d, e), "%.2f")
        bwres = bwres sprintf("RESULT remote_bw bytes=%d ivm_put_MBps=%s tcp_put_MBps=%s mpi_put_MBps=%s put_ivm_tcp=%s ivm_get_MBps=%s tcp_get_MBps=%s mpi_get_MBps=%s get_ivm_tcp=%s\n",
            s, fmt(a, "%.1f"), fmt(b, "%.1f"), fmt(c, "%.1f"), fmt(ratio(a, b), "%.3f"),
            fmt(d, "%.1f"), fmt(e, "%.1f"), fmt(f, "%.1f"), fmt(ratio(d, e), "%.3f"))
        if (s == 67108864) { big_put = ratio(a, b); big_get = ratio(d, e) }
    }
    fm = median("sync_remote_map.first_map_ms")
    printf "IVM first ivmMap of the whole object on node1 (fills the node copy): %s ms\n\n", fmt(fm, "%.1f")
    printf "%s", bwres
    pl = ratio(ip, mp)
    printf "RESULT remote_lat ivm_put_us=%s ivm_get_us=%s tcp_rtt_us=%s mpi_put_us=%s mpi_get_us=%s put_ivm_mpi=%s get_ivm_mpi=%s target=2.0 pass=%s\n",
        fmt(ip, "%.2f"), fmt(ig, "%.2f"), fmt(tr, "%.2f"), fmt(mp, "%.2f"), fmt(mg, "%.2f"),
        fmt(pl, "%.3f"), fmt(ratio(ig, mg), "%.3f"), pl < 0 ? "n/a" : (pl <= 2.0 ? "yes" : "no")
    if (qp >= 0) {
        ql = ratio(qp, mp)
        printf "RESULT remote_lat_poll daemon_poll_us=%s ivm_put_us=%s ivm_get_us=%s mpi_put_us=%s mpi_get_us=%s put_ivm_mpi=%s get_ivm_mpi=%s target=2.0 pass=%s\n",
            poll_us, fmt(qp, "%.2f"), fmt(qg, "%.2f"), fmt(mp, "%.2f"), fmt(mg, "%.2f"), fmt(ql, "%.3f"),
            fmt(ratio(qg, mg), "%.3f"), ql < 0 ? "n/a" : (ql <= 2.0 ? "yes" : "no")
        for (i = 1; i <= n; i++) {
            s = order[i]
            if (s != 67108864) continue
            a = median("pollsync_remote_bw." s ".put_MBps"); d = median("pollsync_remote_bw." s ".get_MBps")
            printf "RESULT remote_bw64_poll daemon_poll_us=%s ivm_put_MBps=%s ivm_get_MBps=%s put_ivm_tcp=%s get_ivm_tcp=%s\n",
                poll_us, fmt(a, "%.1f"), fmt(d, "%.1f"), fmt(ratio(a, median("tcp_bw." s ".put_MBps")), "%.3f"),
                fmt(ratio(d, median("tcp_bw." s ".get_MBps")), "%.3f")
        }
    }
    if (big_put == "")
        printf "RESULT remote_bw64 pass=n/a (no 64 MiB figures; MAX_MIB < 64?)\n"
    else
        printf "RESULT remote_bw64 put_ivm_tcp=%s get_ivm_tcp=%s target=0.80 pass=%s\n",
            fmt(big_put, "%.3f"), fmt(big_get, "%.3f"),
            (big_put >= 0.8 && big_get >= 0.8) ? "yes" : "no"
    ucx_table()
}'
