#!/bin/sh
# ivm-perftest: every operation on 2 simulated nodes and on one node, the
# table's columns and its "-" cells, CSV, and the refusal of bad options.
#   check_perftest.sh BIN_DIR
set -u
bin=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ivm-perftest.XXXXXX")
SOCKDIR=$tmp/sock
WORK=$tmp
mkdir -m 700 "$SOCKDIR"
failures=0
. "$(dirname "$0")/../../ivmrun/test-lib.sh"
trap 'rm -rf "$tmp"' EXIT

run() {
    env -u IVM_SOCKET -u IVM_DAEMON IVM_SOCKET_DIR="$SOCKDIR" timeout 120 "$@" \
        > "$tmp/out" 2> "$tmp/err"
    rc=$?
}

# A row: op size iters p50 mean p99 bw rate; numbers must be positive and finite.
check_row() {
    op=$1
    want_size=$2 want_bw=$3
    line=$(awk -v op="$op" -v s="$want_size" '$1 == op && $2 == s' "$tmp/out")
    if [ -z "$line" ]; then
        fail "no $op row of size $want_size"
        return
    fi
    echo "$line" | awk -v bw="$want_bw" '{
        for (i = 4; i <= 6; i++) if ($i !~ /^[0-9]+\.[0-9]+$/ || $i + 0 <= 0) exit 1
        if (bw == "-" && $7 != "-") exit 1
        if (bw == "n" && ($7 !~ /^[0-9]+\.[0-9]+$/ || $7 + 0 <= 0)) exit 1
        if ($8 !~ /^[0-9]+$/ || $8 + 0 <= 0) exit 1 }' ||
        fail "bad $op row: $line"
}

echo "== 2 nodes, every operation"
run "$bin/ivmrun" --nodes 2 "$bin/ivm-perftest" --op all --size 8,64K --iters 20
if [ "$rc" -ne 0 ]; then
    fail "ivm-perftest --op all exited $rc: $(cat "$tmp/err")"
fi
cat "$tmp/out"
grep -q "^# measuring PE on node1" "$tmp/out" || fail "the PE did not measure from node1"
for op in put get putgroup getgroup; do
    check_row "$op" 8 n
    check_row "$op" 65536 n
done
check_row map 65536 -
check_row dpc - -
grep -Eq "(inf|nan| 0\.00 )" "$tmp/out" && fail "a cell is inf, nan or 0.00"
check_clean "2-node run"

echo "== one node, CSV"
run "$bin/ivmrun" "$bin/ivm-perftest" --op put,get --size 4K:16K --iters 10 --csv
[ "$rc" -eq 0 ] || fail "one-node run exited $rc: $(cat "$tmp/err")"
grep -q "^# measuring PE on node0" "$tmp/out" || fail "the one-node run is not on node0"
[ "$(grep -c '^put,' "$tmp/out")" -eq 3 ] || fail "want put rows for 4K, 8K, 16K: $(cat "$tmp/out")"
grep -q "^op,size,iters,lat_p50_us,lat_mean_us,lat_p99_us,bw_MBps,msg_per_s$" "$tmp/out" ||
    fail "no CSV header"
check_clean "one-node run"

echo "== bad command lines"
for args in "--op fly" "--size 0" "--size 8:4" "--iters 0" "--bogus" "extra"; do
    # shellcheck disable=SC2086
    run "$bin/ivm-perftest" $args
    [ "$rc" -eq 2 ] || fail "ivm-perftest $args exited $rc, want 2"
    grep -q "^ivm-perftest: " "$tmp/err" || fail "ivm-perftest $args: no message: $(cat "$tmp/err")"
done
run "$bin/ivm-perftest" --version
[ "$rc" -eq 0 ] && grep -q "^ivm-perftest (IVM) [0-9]*\.[0-9]*\.[0-9]*$" "$tmp/out" &&
    grep -q "^revision: " "$tmp/out" && grep -q "^library: *IVM [0-9]" "$tmp/out" ||
    fail "--version: $(cat "$tmp/out")"

if [ "$failures" -ne 0 ]; then
    echo "check_perftest: $failures failure(s)"
    exit 1
fi
echo "check_perftest: OK"
