#!/bin/sh
# An example's result under ivmrun on 1 and 3 simulated nodes against its MPI
# version's under mpirun: the line starting with "NAME: ... hash" must be the
# same in all three runs, and the IVM runs must say "NAME: OK". Skips (77),
# saying so, without the MPI version or mpirun.
#
# usage: check-example-mpi.sh BINDIR NAME MPI_NP "IVM ARGS" "MPI ARGS"
set -eu
bin=$1 name=$2 np=$3 ivm_args=$4 mpi_args=$5
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ivm-example.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# --log-level info: a failed run says what the daemons saw (a PE killed by a
# signal is an info line, not a warning).
for nodes in 1 3; do
    # shellcheck disable=SC2086
    timeout 60 "$bin/ivmrun" --log-level info --nodes "$nodes" "$bin/$name" $ivm_args > "$tmp/ivm$nodes" 2>&1 ||
        { cat "$tmp/ivm$nodes"; echo "FAIL: $name on $nodes node(s) exited $?"; exit 1; }
    cat "$tmp/ivm$nodes"
    grep -q "^$name: OK" "$tmp/ivm$nodes" || { echo "FAIL: $name on $nodes node(s): no OK"; exit 1; }
done
mpirun=$(command -v mpirun || true)
if [ ! -x "$bin/$name-mpi" ] || [ -z "$mpirun" ]; then
    echo "SKIP: no $name-mpi or no mpirun: the MPI comparison was not made"
    exit 77
fi
# Open MPI's own allocations leak at MPI_Finalize; in a sanitizer build
# LeakSanitizer would fail the baseline for them (not IVM's code).
# shellcheck disable=SC2086
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 60 "$mpirun" --allow-run-as-root --oversubscribe -np "$np" "$bin/$name-mpi" $mpi_args \
    > "$tmp/mpi" 2>&1 || { cat "$tmp/mpi"; echo "FAIL: $name-mpi exited"; exit 1; }
cat "$tmp/mpi"
want=$(grep "^$name: .*hash" "$tmp/mpi") || { echo "FAIL: $name-mpi printed no hash"; exit 1; }
for nodes in 1 3; do
    got=$(grep "^$name: .*hash" "$tmp/ivm$nodes")
    [ "$got" = "$want" ] || { echo "FAIL: $name on $nodes node(s): '$got', MPI: '$want'"; exit 1; }
done
echo "PASS: $name on 1 and 3 nodes gives MPI's result ($want)"
