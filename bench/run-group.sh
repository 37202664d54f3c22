#!/bin/sh
# Group operations against MPI_Bcast (issue 17). Builds nothing.
#   bench/run-group.sh [BUILD_DIR (build)]
# For each node count N of NODES ("2 4 8"), ROUNDS (5) rounds alternating:
#   IVM: ivmrun --nodes N bench-group --size SIZE --reps REPS --op OP
#   MPI: mpirun -np N --mca btl tcp,self bench-mpi-bcast --size SIZE --reps REPS
# (MPI over TCP loopback as IVM's daemons are; skipped without bench-mpi-bcast
# or mpirun), then prints for each the median, min and max over the rounds of
# each run's median, the ratio IVM/MPI of those medians and the load average
# at the start and the end.
# Environment: NODES ("2 4 8"), SIZE (16777216), ROUNDS (5), REPS (10),
# OP (put: ivmSyncPutGroup; get: ivmSyncGetGroup), MPIRUN (mpirun),
# IVMRUN_OPTS (more ivmrun options, e.g. "--transport ucx"), KEEP_LOGS (a
# directory to keep the raw outputs in).
set -eu

build=${1:-${BUILD_DIR:-build}}
ivmrun=$build/bin/ivmrun
for prog in "$ivmrun" "$build/bin/bench-group"; do
    if [ ! -x "$prog" ]; then
        echo "run-group.sh: $prog not found; build first (cmake --build $build)" >&2
        exit 1
    fi
done
nodes_list=${NODES:-"2 4 8"}
size=${SIZE:-16777216}
rounds=${ROUNDS:-5}
reps=${REPS:-10}
op=${OP:-put}
mpirun=${MPIRUN:-mpirun}
have_mpi=no
if [ -x "$build/bin/bench-mpi-bcast" ] && command -v "$mpirun" >/dev/null 2>&1; then
    have_mpi=yes
else
    echo "run-group.sh: no bench-mpi-bcast or no $mpirun: the MPI column stays empty" >&2
fi
logs=${KEEP_LOGS:-}
if [ -z "$logs" ]; then
    logs=$(mktemp -d "${TMPDIR:-/tmp}/ivm-run-group.XXXXXX")
    trap 'rm -rf "$logs"' EXIT
else
    mkdir -p "$logs"
fi
load0=$(cut -d' ' -f1 /proc/loadavg)

# median_us FILE: the median_us of the RESULT group line of FILE.
median_us() {
    sed -n 's/^RESULT group .*median_us=\([0-9.]*\).*/\1/p' "$1"
}

# stats LABEL FILES...: "median min max" over the runs' medians.
stats() {
    for f in "$@"; do median_us "$f"; done | sort -n |
        awk '{ v[NR] = $1 } END { if (NR == 0) { print "- - -"; exit }
               m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
               printf "%.0f %.0f %.0f\n", m, v[1], v[NR] }'
}

for n in $nodes_list; do
    r=1
    while [ "$r" -le "$rounds" ]; do
        # shellcheck disable=SC2086
        "$ivmrun" --nodes "$n" --timeout 600 ${IVMRUN_OPTS:-} "$build/bin/bench-group" \
            --size "$size" --reps "$reps" --op "$op" >"$logs/ivm.$n.$r" 2>&1 ||
            { cat "$logs/ivm.$n.$r"; echo "run-group.sh: IVM run on $n nodes failed" >&2; exit 1; }
        if [ "$have_mpi" = yes ]; then
            "$mpirun" --allow-run-as-root --oversubscribe -np "$n" --mca btl tcp,self \
                "$build/bin/bench-mpi-bcast" --size "$size" --reps "$reps" \
                >"$logs/mpi.$n.$r" 2>&1 ||
                { cat "$logs/mpi.$n.$r"; echo "run-group.sh: MPI run on $n ranks failed" >&2; exit 1; }
        fi
        r=$((r + 1))
    done
done
load1=$(cut -d' ' -f1 /proc/loadavg)

echo "group $op of $size bytes, $rounds rounds x $reps calls; us: median (min-max) of the rounds' medians"
printf '%-6s %-22s %-22s %s\n' nodes "IVM $op" "MPI_Bcast" "IVM/MPI"
for n in $nodes_list; do
    # shellcheck disable=SC2046
    set -- $(stats $(ls "$logs"/ivm."$n".*))
    ivm_m=$1 ivm_lo=$2 ivm_hi=$3
    mpi_m=- mpi_lo=- mpi_hi=- ratio=-
    if [ "$have_mpi" = yes ]; then
        # shellcheck disable=SC2046
        set -- $(stats $(ls "$logs"/mpi."$n".*))
        mpi_m=$1 mpi_lo=$2 mpi_hi=$3
        ratio=$(awk -v a="$ivm_m" -v b="$mpi_m" 'BEGIN { printf "%.2f", a / b }')
    fi
    printf '%-6s %-22s %-22s %s\n' "$n" "$ivm_m ($ivm_lo-$ivm_hi)" "$mpi_m ($mpi_lo-$mpi_hi)" "$ratio"
    echo "RESULT run_group op=$op bytes=$size nodes=$n ivm_median_us=$ivm_m ivm_min_us=$ivm_lo ivm_max_us=$ivm_hi mpi_median_us=$mpi_m mpi_min_us=$mpi_lo mpi_max_us=$mpi_hi ratio=$ratio"
done
echo "load average: $load0 at the start, $load1 at the end ($(nproc) cores)"
