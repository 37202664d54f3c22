#!/bin/sh
# Chaos soak: the chaos test (tests/integration/test_chaos.c) for many runs or
# a duration. Each run is a 3-node DS-LB job (nbody, ivmrun --nodes 3) in
# which one random PE or daemon is SIGKILLed at a random moment; it must end
# with the documented status and leave nothing behind. Builds nothing.
#   bench/chaos.sh [-n RUNS (100)] [-t SECONDS] [-s SEED] [BUILD_DIR (build)]
# -t runs for that long instead of a number of runs. The seed (default: from
# the clock) is printed; a failed run prints the seed that replays it alone:
#   IVMT_CHAOS_SEED=<seed> IVMT_CHAOS_N=1 build/tests/bin/test_chaos --verbose
# Prints one line per run (what was killed, when, how the run ended) and a
# summary of the outcomes; exit status 0 when every run passed.
set -eu

runs=100
seconds=0
seed=$(date +%s)
while getopts n:t:s:h opt; do
    case $opt in
        n) runs=$OPTARG ;;
        t) seconds=$OPTARG ;;
        s) seed=$OPTARG ;;
        *) sed -n '2,12p' "$0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
build=${1:-${BUILD_DIR:-build}}
test_bin=$build/tests/bin/test_chaos
if [ ! -x "$test_bin" ]; then
    echo "chaos.sh: $test_bin not found; build the tests first (cmake -DIVM_BUILD_TESTS=ON," \
         "cmake --build $build)" >&2
    exit 1
fi

# The test's own time limit: a run takes a few seconds, at most 90.
if [ "$seconds" -gt 0 ]; then
    limit=$((seconds + 120))
else
    limit=$((runs * 90 + 60))
fi
log=$(mktemp "${TMPDIR:-/tmp}/ivm-chaos.XXXXXX")
trap 'rm -f "$log"' EXIT
echo "chaos: seed $seed, $([ "$seconds" -gt 0 ] && echo "$seconds s" || echo "$runs runs")"
rc=0
IVMT_CHAOS_SEED=$seed IVMT_CHAOS_N=$runs IVMT_CHAOS_SECONDS=$seconds \
    "$test_bin" --verbose --timeout "$limit" >"$log" 2>&1 || rc=$?
sed -n 's/^\[----\] \(chaos run .*\)/\1/p' "$log"
echo "--- outcomes"
sed -n 's/^\[----\] chaos run .*: killed \(a daemon\|a PE\|the root PE\|nothing\).*: \(exit [0-9]*\|signal [0-9]*\|time-out [0-9]*\).*/\1: \2/p' "$log" |
    sort | uniq -c
if [ $rc -ne 0 ]; then
    echo "--- failure"
    grep -v '^\[----\] chaos run' "$log" | tail -n 60
    echo "chaos: FAILED (exit status $rc)"
    exit 1
fi
echo "chaos: all runs passed"
