# Shared by ivmrun/test-hosts.sh and ivmrun/test-slurm.sh (sourced; POSIX sh).
# Needs SOCKDIR (the test's private socket directory) and counts in failures.

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# The processes that carry this test's socket directory in their environment.
leftovers() {
    for f in /proc/[0-9]*/environ; do
        if grep -q -z -x -F "IVM_SOCKET_DIR=$SOCKDIR" "$f" 2>/dev/null; then
            pid=${f#/proc/}
            pid=${pid%/environ}
            echo "$pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
        fi
    done
}
