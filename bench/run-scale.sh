#!/bin/sh
# The data path at scale (issue 17): every figure of the issue in one run, IVM
# and its baseline in the same run, with the machine's own limits beside them.
#   bench/run-scale.sh [BUILD_DIR (build)]
# Each of ROUNDS rounds runs, IVM then its baseline, pair after pair:
#   limits   bench-limits (memcpy bandwidth, Unix-socket round trip) and
#            bench-tcp-baseline (loopback TCP round trip and bandwidth by size)
#   put/get  ivmrun --nodes 2 bench-sync-remote  vs  mpirun -np 2 bench-mpi-rma
#            (MPI_Put/Get + MPI_Win_flush; osc pt2pt, pml ob1, btl tcp)
#   group    for N in GROUP_NODES: ivmrun --nodes N bench-group --size GROUP_MIB MiB
#            (ivmSyncPutGroup)  vs  mpirun -np N bench-mpi-bcast (MPI_Bcast)
#   dpc      ivmrun --nodes 2 bench-dpc (one PE cold and warm, local and on
#            node1) and, where bench-dpc has --burst, BURST_ARGS (one bench-dpc
#            run per ';'-separated entry); baseline: posix_spawn (its own) and
#            the Unix-socket round trip (bench-limits)
#   objects  ivmrun bench-objects --live OBJ_LIVE: ivmMalloc/ivmFree/ivmMap/
#            ivmUnmap against live objects of the job (spread over simulated
#            nodes where one node cannot hold them: --spread); baseline: the
#            same calls at the first level (10) and the Unix-socket round trip
# A program or option that this build lacks skips its rows with a note. Then
# it prints per figure the median over the rounds of each run's median, with
# the min-max over the rounds, the baseline the same way, their ratio, and
# the load average at the start and the end; and writes OUT/scale.csv
# (key,median,min,max,runs for every figure) for bench/plot-scale.py.
# Environment: ROUNDS (5), MAX_MIB (64), LAT_CALLS (2000), WARMUP (200), REPS (10),
# GROUP_NODES ("2 4 8"), GROUP_MIB (16), GROUP_REPS (20), DPC_RUNS (100),
# BURST_ARGS ("--burst 1,64,256 --pool 64": cold, then from a pool of 64),
# BURST_RUNS (5, at most 64: bursts per size and run), OBJ_LIVE (10,1000,10000,100000),
# OBJ_REPS (200), MPIRUN (mpirun), OUT (a directory for the logs and the CSV;
# default: a new one under /tmp, printed at the end).
set -eu

build=${1:-${BUILD_DIR:-build}}
bin=$build/bin
for prog in ivmrun bench-sync-remote bench-tcp-baseline bench-limits bench-objects bench-dpc; do
    if [ ! -x "$bin/$prog" ]; then
        echo "run-scale.sh: $bin/$prog not found; build first (cmake --build $build)" >&2
        exit 1
    fi
done
rounds=${ROUNDS:-5}
args="-s ${MAX_MIB:-64} -l ${LAT_CALLS:-2000} -w ${WARMUP:-200} -r ${REPS:-10}"
group_nodes=${GROUP_NODES:-"2 4 8"}
group_bytes=$((${GROUP_MIB:-16} * 1048576))
group_reps=${GROUP_REPS:-20}
dpc_runs=${DPC_RUNS:-100}
burst_args=${BURST_ARGS:-"--burst 1,64,256 --pool 64"}
burst_runs=${BURST_RUNS:-5}
obj_live=${OBJ_LIVE:-10,1000,10000,100000}
obj_reps=${OBJ_REPS:-200}
mpirun=${MPIRUN:-mpirun}
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/ivm-run-scale.XXXXXX")}
mkdir -p "$out"
notes=$out/notes.txt
: >"$notes"
note() {
    echo "run-scale.sh: $*" >&2
    echo "$*" >>"$notes"
}

# What this build (and this machine) has; a missing piece is a note, not a stop.
have_mpi=no
if [ -x "$bin/bench-mpi-rma" ] && command -v "$mpirun" >/dev/null 2>&1; then
    have_mpi=yes
else
    note "no bench-mpi-rma or no $mpirun: no MPI_Put/Get rows"
fi
have_group=no
if [ -x "$bin/bench-group" ]; then
    have_group=yes
else
    note "no bench-group in $bin: no PutGroup rows"
fi
have_bcast=no
if [ -x "$bin/bench-mpi-bcast" ] && command -v "$mpirun" >/dev/null 2>&1; then
    have_bcast=yes
else
    note "no bench-mpi-bcast or no $mpirun: no MPI_Bcast rows"
fi
# bench-dpc's options: its --help where it has one, else the strings it holds.
if { "$bin/bench-dpc" --help 2>&1 || true; } | grep -q -- '--burst' ||
    grep -aq -- '--burst' "$bin/bench-dpc"; then
    have_burst=yes
else
    have_burst=no
    note "bench-dpc has no --burst: no burst rows (256 PEs in one call, 64 with a pool of 64)"
fi
# The object levels: one fd per object in its node's daemon, one mapping per
# object in the PE that made it. Where one node cannot hold the largest level
# (the hard open-file limit, vm.max_map_count), the objects are spread over as
# many simulated nodes as it takes (bench-objects --spread): the job still has
# them all, registered at the root's daemon.
obj_max=$(echo "$obj_live" | tr ',' '\n' | sort -n | tail -1)
nofile=$(sed -n 's/^Max open files *[0-9a-z]* *\([0-9a-z]*\).*/\1/p' /proc/self/limits)
mapmax=$(cat /proc/sys/vm/max_map_count 2>/dev/null || echo 0)
per_node=$obj_max
[ "$nofile" != unlimited ] && [ $((nofile - 300)) -lt "$per_node" ] && per_node=$((nofile - 300))
[ "$mapmax" -gt 0 ] && [ $((mapmax - 2000)) -lt "$per_node" ] && per_node=$((mapmax - 2000))
obj_nodes=$(((obj_max + per_node - 1) / per_node))
obj_opts=
if [ "$obj_nodes" -gt 1 ]; then
    obj_opts=--spread
    note "objects: one node holds at most $per_node objects here (hard open-file limit $nofile, vm.max_map_count $mapmax): the objects are spread over $obj_nodes simulated nodes (bench-objects --spread)"
fi

load0=$(cut -d' ' -f1 /proc/loadavg)
t0=$(date +%s)

# run LOG COMMAND...: one program into LOG; a failure is a note and an empty log.
run() {
    log=$1
    shift
    if ! timeout 900 "$@" >"$log" 2>&1; then
        note "failed: $* (log $log)"
        sed -n '1,5p' "$log" >&2
        : >"$log"
    fi
}

mpiopts="--allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,tcp"

r=1
while [ "$r" -le "$rounds" ]; do
    echo "== round $r of $rounds (load $(cut -d' ' -f1 /proc/loadavg)) =="
    run "$out/limits.$r" "$bin/bench-limits" -r 10
    # shellcheck disable=SC2086
    run "$out/ivm.$r" "$bin/ivmrun" --nodes 2 --timeout 600 "$bin/bench-sync-remote" $args
    # shellcheck disable=SC2086
    run "$out/tcp.$r" "$bin/bench-tcp-baseline" $args
    if [ "$have_mpi" = yes ]; then
        # shellcheck disable=SC2086
        run "$out/mpi.$r" "$mpirun" $mpiopts -np 2 --mca osc pt2pt "$bin/bench-mpi-rma" $args
    fi
    for n in $group_nodes; do
        if [ "$have_group" = yes ]; then
            run "$out/group$n.$r" "$bin/ivmrun" --nodes "$n" --timeout 600 "$bin/bench-group" \
                --size "$group_bytes" --reps "$group_reps" --op put
        fi
        if [ "$have_bcast" = yes ]; then
            # shellcheck disable=SC2086
            run "$out/bcast$n.$r" "$mpirun" $mpiopts -np "$n" "$bin/bench-mpi-bcast" \
                --size "$group_bytes" --reps "$group_reps"
        fi
    done
    run "$out/dpc.$r" "$bin/ivmrun" --nodes 2 --timeout 600 "$bin/bench-dpc" -n "$dpc_runs"
    if [ "$have_burst" = yes ]; then
        k=0
        echo "$burst_args" | tr ';' '\n' | while read -r b; do
            k=$((k + 1))
            # shellcheck disable=SC2086
            run "$out/burst$k.$r" "$bin/ivmrun" --nodes 2 --timeout 600 "$bin/bench-dpc" $b \
                -n "$burst_runs"
        done
    fi
    # shellcheck disable=SC2086
    run "$out/objects.$r" env IVM_MAX_OBJECTS_PER_JOB=$((obj_max + 16)) "$bin/ivmrun" \
        --nodes "$obj_nodes" --timeout 600 "$bin/bench-objects" --live "$obj_live" \
        --reps "$obj_reps" $obj_opts
    grep -h '^RESULT' "$out"/*."$r" | sed 's/^/  /'
    r=$((r + 1))
done
load1=$(cut -d' ' -f1 /proc/loadavg)
echo
echo "== $rounds rounds in $(($(date +%s) - t0)) s; load average $load0 at the start, $load1 at the end =="

# Every RESULT line -> key value. The key: the tag, the fields that name the
# row (words before the first k=v; op, bytes, nodes, ranks, live), then the
# figure's field.
cat "$out"/*.[0-9]* | awk -v csv="$out/scale.csv" -v rounds="$rounds" \
    -v group_nodes="$group_nodes" -v group_bytes="$group_bytes" -v obj_live="$obj_live" '
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
function mmm(key, f,    n, v) {
    n = sorted(key, v)
    if (n == 0) return "n/a"
    return sprintf(f " (" f "-" f ")", median(key), v[1], v[n])
}
function fmt(x, f) { return x < 0 ? "n/a" : sprintf(f, x) }
function ratio(a, b) { return (a < 0 || b <= 0) ? -1 : a / b }
function row(name, a, fa, b, fb, rf) {
    printf "%-34s %26s %26s %8s\n", name, mmm(a, fa), b == "" ? "" : mmm(b, fb),
        b == "" ? "" : fmt(ratio(median(a), median(b)), rf)
}
/^RESULT / {
    id = $2
    for (i = 3; i <= NF && $i !~ /=/; i++) id = id "." $i  # "RESULT dpc local ..."
    first = i
    for (i = first; i <= NF; i++) {
        split($i, kv, "=")
        if (kv[1] ~ /^(op|bytes|nodes|ranks|live|mode|n)$/) id = id "." kv[1] "=" kv[2]
    }
    for (i = first; i <= NF; i++) {
        split($i, kv, "=")
        if (kv[1] ~ /^(op|bytes|nodes|ranks|live|mode|n|calls|runs|pass|target_ms|pool|min_ms|max_ms)$/) continue
        if (kv[2] !~ /^-?[0-9.]+$/) continue
        key = id "." kv[1]
        if (!(key in cnt)) order[++nkeys] = key
        cnt[key]++; vals[key, cnt[key]] = kv[2]
    }
}
END {
    h = "%-34s %26s %26s %8s\n"
    printf "median (min-max) over %d rounds of each run'"'"'s median\n", rounds
    printf "\n-- the machine'"'"'s limits --\n"
    row("TCP 8 B round trip, us", "tcp_lat.rtt_median_us", "%.1f")
    row("TCP loopback 64 MiB put, MB/s", "tcp_bw.bytes=67108864.put_MBps", "%.0f")
    row("memcpy 64 MiB, MB/s", "limits.memcpy_MBps", "%.0f")
    row("Unix-socket 8 B round trip, us", "limits.uds_rtt_median_us", "%.2f")

    printf "\n-- 8 B remote Put/Get (node1 -> node0) --\n"
    printf h, "", "IVM", "MPI (+flush)", "IVM/MPI"
    row("put, us", "sync_remote_lat.put_median_us", "%.1f", "mpi_lat.put_median_us", "%.1f", "%.2f")
    row("get, us", "sync_remote_lat.get_median_us", "%.1f", "mpi_lat.get_median_us", "%.1f", "%.2f")
    row("  (TCP round trip, us)", "tcp_lat.rtt_median_us", "%.1f")

    printf "\n-- Put and Get bandwidth by size, MB/s --\n"
    printf "%-10s %16s %16s %16s %16s %16s %16s %8s\n", "bytes", "IVM put", "IVM get", "MPI put", "MPI get", "TCP put", "TCP get", "get/put"
    for (k = 1; k <= nkeys; k++) {
        if (order[k] ~ /^sync_remote_bw\.bytes=[0-9]+\.put_MBps$/) {
            b = order[k]; sub(/^sync_remote_bw\.bytes=/, "", b); sub(/\..*/, "", b)
            p = "bytes=" b
            printf "%-10s %16s %16s %16s %16s %16s %16s %8s\n", b,
                mmm("sync_remote_bw." p ".put_MBps", "%.0f"), mmm("sync_remote_bw." p ".get_MBps", "%.0f"),
                mmm("mpi_bw." p ".put_MBps", "%.0f"), mmm("mpi_bw." p ".get_MBps", "%.0f"),
                mmm("tcp_bw." p ".put_MBps", "%.0f"), mmm("tcp_bw." p ".get_MBps", "%.0f"),
                fmt(ratio(median("sync_remote_bw." p ".get_MBps"), median("sync_remote_bw." p ".put_MBps")), "%.2f")
        }
    }
    g = median("sync_remote_bw.bytes=67108864.get_MBps"); t = median("tcp_bw.bytes=67108864.get_MBps")
    printf "64 MiB Get: IVM %s MB/s, raw TCP %s MB/s: %s of TCP\n", fmt(g, "%.0f"), fmt(t, "%.0f"), fmt(ratio(g, t), "%.2f")

    printf "\n-- PutGroup of %d bytes vs MPI_Bcast --\n", group_bytes
    printf h, "", "IVM PutGroup, us", "MPI_Bcast, us", "IVM/MPI"
    n = split(group_nodes, gn, " ")
    for (i = 1; i <= n; i++)
        row(gn[i] " nodes", "group.op=put.bytes=" group_bytes ".nodes=" gn[i] ".median_us", "%.0f",
            "group.op=bcast.bytes=" group_bytes ".ranks=" gn[i] ".median_us", "%.0f", "%.2f")

    printf "\n-- PE creation --\n"
    printf h, "", "IVM, ms", "baseline, ms", "ratio"
    row("one PE, local, cold", "dpc.local.median_ms", "%.3f", "dpc.local.spawn_median_ms", "%.3f", "%.2f")
    row("one PE, node1, cold", "dpc.remote.median_ms", "%.3f", "dpc.local.spawn_median_ms", "%.3f", "%.2f")
    row("one PE, local, warm (pool)", "dpc.warm-local.median_ms", "%.3f", "dpc.local.median_ms", "%.3f", "%.2f")
    u = median("limits.uds_rtt_median_us")
    w = median("dpc.warm-local.median_ms")
    printf "warm local PE vs the Unix-socket round trip (%s us): %s x\n", fmt(u, "%.2f"), fmt(ratio(w * 1000, u), "%.0f")
    for (k = 1; k <= nkeys; k++)
        if (order[k] ~ /^dpc\./ && order[k] !~ /^dpc\.(local|remote|warm-local|warm-remote)\./)
            row(substr(order[k], 5), order[k], "%.3f")

    printf "\n-- object calls against live objects, us --\n"
    printf "%-8s %18s %18s %18s %18s %28s\n", "live", "ivmMalloc", "ivmFree", "ivmMap", "ivmUnmap", "x the first level (m/f/m/u)"
    n = split(obj_live, lv, ",")
    split("malloc_us free_us map_us unmap_us", f, " ")
    for (i = 1; i <= n; i++) {
        if (cnt["objects.live=" lv[i] ".malloc_us"] == 0) { printf "%-8s skipped (see the notes)\n", lv[i]; continue }
        s = ""
        for (j = 1; j <= 4; j++)
            s = s (j > 1 ? "/" : "") fmt(ratio(median("objects.live=" lv[i] "." f[j]), median("objects.live=" lv[1] "." f[j])), "%.2f")
        printf "%-8s %18s %18s %18s %18s %28s\n", lv[i], mmm("objects.live=" lv[i] ".malloc_us", "%.1f"),
            mmm("objects.live=" lv[i] ".free_us", "%.1f"), mmm("objects.live=" lv[i] ".map_us", "%.1f"),
            mmm("objects.live=" lv[i] ".unmap_us", "%.1f"), s
    }
    printf "(a call is at least one Unix-socket round trip: %s us)\n", fmt(u, "%.2f")

    print "key,median,min,max,runs" > csv
    for (k = 1; k <= nkeys; k++) {
        m = sorted(order[k], v)
        printf "%s,%s,%s,%s,%d\n", order[k], median(order[k]), v[1], v[m], m > csv
    }
}'
if [ -s "$notes" ]; then
    echo
    echo "notes:"
    sed 's/^/  /' "$notes"
fi
echo
echo "logs and $out/scale.csv in $out (plots: bench/plot-scale.py $out/scale.csv)"
