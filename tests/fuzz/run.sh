#!/usr/bin/env bash
# Build the libFuzzer targets with clang and run each for SECONDS (default 5).
#   tests/fuzz/run.sh [SECONDS] [TARGET...]     (targets: proto peer gpud devspec
#                                                config hosts; default: all)
#   IVM_FUZZ_BUILD_DIR  build directory (default: build-fuzz)
#   IVM_FUZZ_JOBS       targets fuzzed at once (default: the number of cores)
# Every target first runs its seeds (tests/fuzz/corpus/NAME, read only), then
# mutates them; what it learns is kept in BUILD/corpus/NAME for the next run.
# A crash, leak, UBSan report or timeout fails the script and leaves the input in
# BUILD/crashes/NAME-*; after fixing the code, add that input to
# tests/fuzz/corpus/NAME/ so every later run replays it.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
seconds=${1:-5}
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then
    targets=(proto peer gpud devspec config hosts)
fi
build_dir=${IVM_FUZZ_BUILD_DIR:-build-fuzz}
jobs=${IVM_FUZZ_JOBS:-$(nproc)}

if ! command -v clang >/dev/null 2>&1; then
    echo "fuzz: clang not found (Debian: clang libclang-rt-14-dev)" >&2
    exit 1
fi
mkdir -p "$build_dir"
CC=clang cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DIVM_BUILD_FUZZERS=ON -DIVM_BUILD_TESTS=OFF -DIVM_BUILD_APPS=OFF \
    -DIVM_BUILD_EXAMPLES=OFF -DIVM_ENABLE_CUDA=OFF >"$build_dir/configure.log" 2>&1 ||
    { cat "$build_dir/configure.log" >&2; exit 1; }
cmake --build "$build_dir" -j"$(nproc)" --target ivm_fuzzers

bin=$build_dir/tests/fuzz
mkdir -p "$bin/crashes" "$bin/logs"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

# fuzz_one NAME: SECONDS of libFuzzer on NAME; its output in BUILD/logs/NAME.log.
fuzz_one() {
    local name=$1 work=$bin/corpus/$1 log=$bin/logs/$1.log
    mkdir -p "$work"
    if "$bin/fuzz_$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -max_len=4096 -print_final_stats=1 -artifact_prefix="$bin/crashes/$name-" \
        "$work" "tests/fuzz/corpus/$name" >"$log" 2>&1; then
        printf 'fuzz %-8s ok   %s\n' "$name" \
            "$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2 " runs"}')"
        return 0
    fi
    printf 'fuzz %-8s FAILED (log: %s)\n' "$name" "$log"
    grep -E -A30 '^==[0-9]+==ERROR|runtime error|^SUMMARY|Test unit written' "$log" | head -60
    return 1
}

status=0
pids=()
for name in "${targets[@]}"; do
    if [[ ! -d tests/fuzz/corpus/$name ]]; then
        echo "fuzz: no target $name" >&2
        exit 2
    fi
    fuzz_one "$name" &
    pids+=($!)
    if ((${#pids[@]} >= jobs)); then
        wait "${pids[0]}" || status=1
        pids=("${pids[@]:1}")
    fi
done
for pid in "${pids[@]}"; do
    wait "$pid" || status=1
done
exit "$status"
