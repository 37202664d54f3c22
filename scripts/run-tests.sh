#!/usr/bin/env bash
# Build IVM with its tests and run every test; exits with ctest's status.
# Installs the dependencies first when run as root on Debian 12.
#   IVM_BUILD_DIR   build directory (default: build)
#   IVM_SKIP_DEPS=1 do not check the dependencies
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${IVM_BUILD_DIR:-build}

step() {
    printf '\n==> %s\n' "$*"
}

step "checking dependencies: scripts/install-deps.sh"
bash scripts/install-deps.sh

step "configuring: cmake -S . -B $build_dir -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIVM_BUILD_TESTS=ON"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIVM_BUILD_TESTS=ON

step "building: cmake --build $build_dir -j$(nproc)"
cmake --build "$build_dir" -j"$(nproc)"

step "testing: ctest --test-dir $build_dir --output-on-failure --timeout 300"
status=0
ctest --test-dir "$build_dir" --output-on-failure --timeout 300 || status=$?

if ((status == 0)); then
    step "all tests passed"
else
    step "some tests failed (ctest exit status $status)"
fi
exit "$status"
