#!/bin/sh
# Addressed signals, barriers and the halo exchange (issue 16) beside their
# MPI baselines, in one run. Builds nothing.
#   bench/run-psync.sh [BUILD_DIR (build)]
# Runs ROUNDS rounds, alternating IVM and MPI within each round:
#   ping  same node:  ivmrun --nodes 1 bench-psync ping (signal board, then
#                     IVM_SIGNAL_BOARD=0: through the daemon) | MPI 0 B Send/Recv
#   ping  2 nodes:    ivmrun --nodes 2 bench-psync ping --node node1
#   ownping:          the same with ivmSignal / ivmWait, one node (board, then
#                     IVM_SIGNAL_BOARD=0) and 2 nodes
#   barrier 2 PEs, 8 PEs on one node, 8 PEs over 3 nodes | MPI_Barrier -np 2 / 8
#   halo  2 nodes:    ivmrun --nodes 2 bench-psync halo --bytes HALO_BYTES
#                     | MPI_Sendrecv of the same rows, -np 2; and with --split
#                     (ivmSyncPut + ivmSignalTo: ivmSyncPutSignal before it
#                     became one daemon operation)
#   heat  1 vs 3 nodes at the same PE count: examples/heat HEAT_ARGS, the
#         time of its steps as its root sees it; on 3 nodes also with
#         IVM_PUT_SIGNAL=0 (ivmSyncPutSignal as two calls)
# MPI: mpirun --allow-run-as-root --oversubscribe --mca btl tcp,self (TCP on
# loopback, as our daemons' links). Prints per row the median over the
# rounds of each run's median with min-max, the IVM/MPI ratio, and the load
# average at the start and the end.
# A run that fails is run once more (said on stderr): on the shared machine
# a run now and then loses its daemon connection at start.
# Environment: ROUNDS (5), PING_N (2000), BAR_N (300), HALO_N (1000),
# HALO_BYTES (8192), HEAT_ARGS ("400 400 1000 4"), MPIRUN (mpirun),
# KEEP_LOGS (a directory to keep the raw outputs in), QUIET_FILE (a file
# whose presence pauses the run before each round: another benchmark runs).
set -eu

build=${1:-${BUILD_DIR:-build}}
ivmrun=$build/bin/ivmrun
for prog in "$ivmrun" "$build/bin/bench-psync" "$build/bin/heat"; do
    if [ ! -x "$prog" ]; then
        echo "run-psync.sh: $prog not found; build first (cmake --build $build)" >&2
        exit 1
    fi
done
rounds=${ROUNDS:-5}
ping_n=${PING_N:-2000}
bar_n=${BAR_N:-300}
halo_n=${HALO_N:-1000}
halo_b=${HALO_BYTES:-8192}
heat_args=${HEAT_ARGS:-"400 400 1000 4"}
mpirun=${MPIRUN:-mpirun}
have_mpi=no
if [ -x "$build/bin/bench-mpi-psync" ] && command -v "$mpirun" >/dev/null 2>&1; then
    have_mpi=yes
else
    echo "run-psync.sh: no bench-mpi-psync or no $mpirun: the MPI column stays empty" >&2
fi
load0=$(cut -d' ' -f1 /proc/loadavg)

logs=${KEEP_LOGS:-}
if [ -z "$logs" ]; then
    logs=$(mktemp -d "${TMPDIR:-/tmp}/ivm-run-psync.XXXXXX")
    trap 'rm -rf "$logs"' EXIT
else
    mkdir -p "$logs"
fi
out=$logs/rows

# row NAME CMD...: run CMD, append "NAME median_us" from its op= line.
row() {
    name=$1
    shift
    if ! "$@" >"$logs/last" 2>&1; then
        echo "run-psync.sh: $name failed, once more: $(tail -n 1 "$logs/last")" >&2
        if ! "$@" >"$logs/last" 2>&1; then
            cat "$logs/last"
            echo "run-psync.sh: $name failed: $*" >&2
            exit 1
        fi
    fi
    sed -n 's/^op=.* median_us=\([0-9.]*\).*/\1/p' "$logs/last" | head -n 1 |
        sed "s/^/$name /" >>"$out"
}

# heat NAME NODES [IVMRUN OPTIONS...]: the time of one heat run's steps (its
# own timer), in ms.
heat() {
    name=$1
    nodes=$2
    shift 2
    # shellcheck disable=SC2086
    "$ivmrun" --nodes "$nodes" --timeout 600 "$@" "$build/bin/heat" $heat_args >"$logs/last" 2>&1 ||
        { cat "$logs/last"; echo "run-psync.sh: heat on $nodes node(s) failed" >&2; exit 1; }
    grep -q '^heat: OK' "$logs/last" || { cat "$logs/last"; exit 1; }
    sed -n 's/^heat: the steps took \([0-9.]*\) ms.*/\1/p' "$logs/last" | sed "s/^/$name /" >>"$out"
}

ivm() { "$ivmrun" --timeout 600 "$@"; }
mpi() { timeout 600 "$mpirun" --allow-run-as-root --oversubscribe --mca btl tcp,self "$@"; }
mb=$build/bin/bench-mpi-psync
b=$build/bin/bench-psync

: >"$out"
r=1
while [ "$r" -le "$rounds" ]; do
    while [ -n "${QUIET_FILE:-}" ] && [ -e "$QUIET_FILE" ]; do sleep 30; done
    echo "== round $r of $rounds (load $(cut -d' ' -f1 /proc/loadavg)) =="
    row ivm_ping_board ivm --nodes 1 "$b" ping -n "$ping_n"
    row ivm_ping_daemon ivm --nodes 1 -x IVM_SIGNAL_BOARD=0 "$b" ping -n "$ping_n"
    row ivm_ping_2nodes ivm --nodes 2 "$b" ping -n "$ping_n" --node node1
    row ivm_own_board ivm --nodes 1 "$b" ownping -n "$ping_n"
    row ivm_own_daemon ivm --nodes 1 -x IVM_SIGNAL_BOARD=0 "$b" ownping -n "$ping_n"
    row ivm_own_2nodes ivm --nodes 2 "$b" ownping -n "$ping_n" --node node1
    [ "$have_mpi" = no ] || row mpi_ping mpi -np 2 "$mb" ping -n "$ping_n"
    row ivm_bar2_board ivm --nodes 1 "$b" barrier -p 2 -n "$bar_n"
    row ivm_bar8_board ivm --nodes 1 "$b" barrier -p 8 -n "$bar_n"
    row ivm_bar8_3nodes ivm --nodes 3 "$b" barrier -p 8 -n "$bar_n"
    [ "$have_mpi" = no ] || row mpi_bar2 mpi -np 2 "$mb" barrier -n "$bar_n"
    [ "$have_mpi" = no ] || row mpi_bar8 mpi -np 8 "$mb" barrier -n "$bar_n"
    row ivm_halo_2nodes ivm --nodes 2 "$b" halo -n "$halo_n" --bytes "$halo_b"
    row ivm_halo_split ivm --nodes 2 "$b" halo -n "$halo_n" --bytes "$halo_b" --split
    [ "$have_mpi" = no ] || row mpi_halo mpi -np 2 "$mb" halo -n "$halo_n" --bytes "$halo_b"
    heat heat_1node_ms 1
    heat heat_3nodes_ms 3
    heat heat_3nodes_two_ms 3 -x IVM_PUT_SIGNAL=0
    r=$((r + 1))
done
load1=$(cut -d' ' -f1 /proc/loadavg)

awk -v rounds="$rounds" -v load0="$load0" -v load1="$load1" -v hb="$halo_b" \
    -v heat="$heat_args" '
function sorted(k, v,    n, i, j, t) {
    n = cnt[k]
    for (i = 1; i <= n; i++) v[i] = vals[k, i]
    for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
    return n
}
function med(k,    n, v) { n = sorted(k, v); if (n == 0) return -1; return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
function mmm(k,    n, v) { n = sorted(k, v); if (n == 0) return "n/a"; return sprintf("%.2f (%.2f-%.2f)", med(k), v[1], v[n]) }
function ratio(a, b) { return (a < 0 || b <= 0) ? "n/a" : sprintf("%.2f", a / b) }
function line(what, k, m) {
    printf "%-34s %26s %26s %8s\n", what, mmm(k), m == "" ? "" : mmm(m), m == "" ? "" : ratio(med(k), med(m))
    printf "RESULT psync row=%s ivm=%.2f mpi=%.2f\n", k, med(k), m == "" ? -1 : med(m) > "/dev/stderr"
}
{ cnt[$1]++; vals[$1, cnt[$1]] = $2 }
END {
    printf "\n== median (min-max) over %d rounds of each run'"'"'s median, us; load average %s at the start, %s at the end ==\n", rounds, load0, load1
    printf "%-34s %26s %26s %8s\n", "what", "IVM", "MPI (TCP)", "IVM/MPI"
    line("signal same node, board", "ivm_ping_board", "mpi_ping")
    line("signal same node, daemon", "ivm_ping_daemon", "mpi_ping")
    line("signal node0 -> node1", "ivm_ping_2nodes", "mpi_ping")
    line("ivmSignal same node, board", "ivm_own_board", "mpi_ping")
    line("ivmSignal same node, daemon", "ivm_own_daemon", "mpi_ping")
    line("ivmSignal node0 -> node1", "ivm_own_2nodes", "mpi_ping")
    line("barrier 2 PEs one node, board", "ivm_bar2_board", "mpi_bar2")
    line("barrier 8 PEs one node, board", "ivm_bar8_board", "mpi_bar8")
    line("barrier 8 PEs over 3 nodes", "ivm_bar8_3nodes", "mpi_bar8")
    line("halo step " hb " B, 2 nodes", "ivm_halo_2nodes", "mpi_halo")
    line("  same, put + signal (--split)", "ivm_halo_split", "mpi_halo")
    printf "%-34s %26s %26s %8s\n", "heat " heat ", steps ms", "1 node: " mmm("heat_1node_ms"),
        "3 nodes: " mmm("heat_3nodes_ms"), ratio(med("heat_3nodes_ms"), med("heat_1node_ms"))
    printf "%-34s %26s %26s %8s\n", "  3 nodes, IVM_PUT_SIGNAL=0", "", "3 nodes: " mmm("heat_3nodes_two_ms"),
        ratio(med("heat_3nodes_two_ms"), med("heat_1node_ms"))
    printf "(heat: the ratio is 3 nodes over 1 node)\n"
}' "$out"
