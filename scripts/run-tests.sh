#!/usr/bin/env bash
# Build IVM with its tests and run every test, three times over: the normal
# build; the whole suite again under ASan+UBSan (its own build directory); the
# libFuzzer targets for a few seconds each (tests/fuzz/run.sh). Exits non-zero
# when any of them fails. Installs the dependencies first when run as root on
# Debian 12.
#   IVM_BUILD_DIR       build directory (default: build)
#   IVM_ASAN_BUILD_DIR  build directory of the sanitizer pass (default: build-asan)
#   IVM_SANITIZE_PASS=0 skip the sanitizer pass
#   IVM_FUZZ_SECONDS    seconds per fuzz target (default 4; 0 skips the fuzzing)
#   IVM_SKIP_DEPS=1     do not check the dependencies
#   IVM_TEST_JOBS       tests ctest runs side by side (default: the CPU count)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${IVM_BUILD_DIR:-build}

# Each step with the seconds since the start: where a slow CI run spent them.
step() {
    printf '\n==> [%4d s] %s\n' "$SECONDS" "$*"
}

# The layering of ivmd (calls go down only, docs/architecture.md): an include
# that goes up fails the run before anything is built.
step "layering: scripts/check-layers.sh"
bash scripts/check-layers.sh

step "checking dependencies: scripts/install-deps.sh"
bash scripts/install-deps.sh

. scripts/cmake-generator.sh

step "configuring: cmake -S . -B $build_dir -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIVM_BUILD_TESTS=ON"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIVM_BUILD_TESTS=ON

step "building: cmake --build $build_dir -j$(nproc)"
cmake --build "$build_dir" -j"$(nproc)"

# A report for now: functions over 80 lines or CCN 20 (issue 13); it never
# fails the run.
step "complexity report: scripts/complexity.sh"
bash scripts/complexity.sh || true

# Tests side by side: most of a test's time is its processes waiting for one
# another, which leaves a 2-vCPU machine about 60 % idle with one test at a
# time. Each test has its own socket directory, ports, namespaces and
# processes; the few that cannot run beside another (CPU-share cgroups, a
# whole-/dev/shm check, the one-hop assertion of test_psync's far_* tests) run alone
# (RUN_SERIAL; tests/CMakeLists.txt says why for each).
jobs=${IVM_TEST_JOBS:-$(nproc)}

step "testing: ctest --test-dir $build_dir --output-on-failure --timeout 300 --parallel $jobs"
status=0
rm -f "$build_dir/Testing/Temporary/LastTestsFailed.log"
ctest --test-dir "$build_dir" --output-on-failure --timeout 300 --parallel "$jobs" || status=$?
if ((status != 0)); then
    step "some tests failed (ctest exit status $status)"
fi

# The sanitizer pass: every report fails it. ASan, LSan and UBSan write to files
# (log_path), which also catches processes whose exit status no test checks
# (daemons that ivmrun starts, ivm-boot); a UBSan report ends its process
# (-fno-sanitize-recover). Suppressions, each with its reason: tests/sanitizers/.
# A PE exiting runs the leak checker, which can take seconds on a loaded
# machine: the tests give a run's processes 20 s to be gone, not 5.
# Every process pays tens of milliseconds more under the sanitizers (their
# start, and the leak checker's scan at exit), so the tests that make
# hundreds of PEs or thousands of objects make fewer in this build
# (__SANITIZE_ADDRESS__: DS-LB chain, bursts, live objects). The pass leaves
# out the suites' second runs with the warm pool on (NAME_pool, which the
# normal pass runs): 270 of its 720 s on a 2-vCPU VM, one test at a time,
# over the 15-minute budget of a CI run; the pool's code runs under the sanitizers in
# test_pool, test_pool_cudastub and the pool scenarios of the other suites.
# Nor does it run check_layers and install (a script over the sources, and
# an install tree built and used by the normal pass), 40 s together here.
# Its build leaves out the apps' CUDA kernels (-DIVM_APPS_CUDA=OFF; the
# normal build compiles them): its GPU PEs run the CPU kernels on the emu
# backend either way.
if [[ "${IVM_SANITIZE_PASS:-1}" != 0 ]]; then
    asan_dir=${IVM_ASAN_BUILD_DIR:-build-asan}
    step "sanitizer pass: cmake -S . -B $asan_dir -DIVM_SANITIZE=address,undefined -DIVM_APPS_CUDA=OFF"
    cmake -S . -B "$asan_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIVM_BUILD_TESTS=ON \
        -DIVM_SANITIZE=address,undefined -DIVM_APPS_CUDA=OFF
    cmake --build "$asan_dir" -j"$(nproc)"
    san_logs=$(mktemp -d "${TMPDIR:-/tmp}/ivm-sanitize.XXXXXX")
    san_status=0
    rm -f "$asan_dir/Testing/Temporary/LastTestsFailed.log"
    ASAN_OPTIONS=detect_leaks=1:log_path=$san_logs/asan \
    LSAN_OPTIONS=suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$san_logs/ubsan \
    IVMT_LEFTOVER_GRACE_S=20 \
        ctest --test-dir "$asan_dir" --output-on-failure --timeout 300 --parallel "$jobs" \
            -E '^(test_.+_pool|check_layers|install)$' ||
        san_status=$?
    # A report names an error (ASan, LSan: "ERROR: ...Sanitizer"; UBSan:
    # "runtime error:"). A file without one holds only the leak checker's own
    # notices, e.g. "Unable to get registers from thread N" when a thread was
    # exiting (a killed PE) as the checker stopped them at exit, or "Running
    # thread N was not suspended" from test_harness's
    # exit_without_teardown_leaves_no_daemon_or_directory (a fork of Criterion's
    # threaded runner that calls exit() on purpose): shown, not a failure.
    reports=$(grep -l -E 'ERROR: [A-Za-z]*Sanitizer|runtime error:' "$san_logs"/* 2>/dev/null || true)
    if compgen -G "$san_logs/*" >/dev/null; then
        step "sanitizer output (in $san_logs):"
        for f in "$san_logs"/*; do
            printf -- '--- %s\n' "$f"
            head -40 "$f"
        done
    fi
    if [[ -n "$reports" ]]; then
        step "sanitizer reports: $reports"
        san_status=1
    else
        rm -rf "$san_logs"
    fi
    if ((san_status != 0)); then
        step "the sanitizer pass failed"
        status=1
    fi
fi

if [[ "${IVM_FUZZ_SECONDS:-4}" != 0 ]]; then
    step "fuzzing: tests/fuzz/run.sh ${IVM_FUZZ_SECONDS:-4}"
    bash tests/fuzz/run.sh "${IVM_FUZZ_SECONDS:-4}" || { step "a fuzz target failed"; status=1; }
fi

# What each failed test printed, last: a CI log is often read from its end,
# where ctest's own output of the failure is long gone. From ctest's
# Testing/Temporary files of each pass; the last 60 lines per test.
failure_digest() {
    local dir=$1 failed=$1/Testing/Temporary/LastTestsFailed.log name
    [[ -f "$failed" ]] || return 0
    while IFS=: read -r _ name; do
        [[ -n "$name" ]] || continue
        printf -- '--- %s (%s): its last 60 lines\n' "$name" "$dir"
        awk -v t="$name" '
            $0 ~ "^[0-9]+/[0-9]+ Testing: " t "$" { on = 1; next }
            on && index($0, "\"" t "\" end time:") == 1 { on = 0 }
            on { print }' "$dir/Testing/Temporary/LastTest.log" | tail -60
    done <"$failed"
}

if ((status == 0)); then
    step "all tests passed"
else
    step "some tests failed; what they printed:"
    failure_digest "$build_dir"
    [[ "${IVM_SANITIZE_PASS:-1}" == 0 ]] || failure_digest "${IVM_ASAN_BUILD_DIR:-build-asan}"
    step "some tests failed"
fi
exit "$status"
