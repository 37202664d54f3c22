#!/bin/sh
# Runs the backend's driver call sequence on the CUDA stand-in, correct and
# with each deliberate defect (broken.c): the correct one must exit 0 without a
# "cudastub:" line; each broken one must fail, with the stand-in's message
# for its defect on stderr.
#   check_broken.sh BIN_DIR STUB_LIB_DIR
set -u
bin=$1
export LD_LIBRARY_PATH="$2"
export CUDASTUB_DEVICES=1:64M
unset CUDA_VISIBLE_DEVICES
# The broken variants fail on purpose (a deliberate SIGSEGV, the stand-in's
# exit at its report): under the sanitizer pass, their crash is the expected
# result, not a finding, so AddressSanitizer neither catches the SIGSEGV nor
# writes a report to the pass's log files.
if [ -n "${ASAN_OPTIONS:-}" ]; then
    export ASAN_OPTIONS=handle_segv=0:detect_leaks=0:verify_asan_link_order=0
fi
failed=0
out=$(mktemp "${TMPDIR:-/tmp}/cudastub-broken.XXXXXX")
trap 'rm -f "$out"' EXIT

# run VARIANT EXPECTED: EXPECTED is the stand-in's message, or "" for the correct one.
run() {
    "$bin/cudastub_broken_$1" >"$out" 2>&1
    rc=$?
    if [ -z "$2" ]; then
        if [ $rc -ne 0 ] || grep -q 'cudastub:' "$out"; then
            echo "FAIL $1: the correct sequence exited $rc or made the stand-in complain:"
            cat "$out"
            failed=1
            return
        fi
    elif [ $rc -eq 0 ] || ! grep -q "cudastub: .*$2" "$out"; then
        echo "FAIL $1: exited $rc; expected a failure with the stand-in's message '$2':"
        cat "$out"
        failed=1
        return
    fi
    echo "ok   $1 (exit $rc)${2:+: $(grep -m1 'cudastub:' "$out")}"
}

run correct     ""
run no_access   "has no access (cuMemSetAccess)"
run no_sync     "async copy not yet synchronised"
run handle_type "was not requested at cuMemCreate"
run leak        "leak: allocation handle .* never released"
exit $failed
