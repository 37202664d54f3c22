# Shared by ivmrun/test-hosts.sh and ivmrun/test-slurm.sh (sourced; POSIX sh).
# Needs SOCKDIR (the test's private socket directory) and WORK (out, err of
# the last run, status in rc); counts in failures.

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

# What else of the last run is left, one line (nothing: none). A sourcing
# script redefines it (test-slurm.sh: jobs still in the queue).
extra_leftovers() {
    :
}

# After a run: nothing of it may remain, within CLEAN_TRIES (30) tenths of a
# second of grace for exits. Returns 0 when clean, else 1 after fail lines.
check_clean() {
    what=$1
    tries=0
    while :; do
        procs=$(leftovers)
        files=$(ls -A "$SOCKDIR")
        extra=$(extra_leftovers)
        if [ -z "$procs" ] && [ -z "$files" ] && [ -z "$extra" ]; then
            return 0
        fi
        tries=$((tries + 1))
        if [ $tries -ge "${CLEAN_TRIES:-30}" ]; then
            break
        fi
        sleep 0.1
    done
    [ -n "$procs" ] && fail "$what: processes left: $procs"
    [ -n "$files" ] && fail "$what: files left in $SOCKDIR: $files"
    [ -n "$extra" ] && fail "$what: $extra"
    return 1
}

# After a kill at $2 (date +%s%N): nothing of the run may be left (as
# check_clean; the processes and files only when $4 is "procs") within $1
# ms. Sets gone_ms; returns 0 when clean, else 1 after fail lines.
check_gone() {
    cg_limit=$1
    # The sanitizer pass (IVMT_LEFTOVER_GRACE_S): exits run the leak checker,
    # which takes seconds on a loaded machine; timing is the normal pass's job.
    if [ -n "$IVMT_LEFTOVER_GRACE_S" ] && [ "$((IVMT_LEFTOVER_GRACE_S * 1000))" -gt "$cg_limit" ]; then
        cg_limit=$((IVMT_LEFTOVER_GRACE_S * 1000))
    fi
    cg_start=$2
    cg_what=$3
    while :; do
        procs=$(leftovers)
        files=$(ls -A "$SOCKDIR")
        extra=
        [ "$4" = procs ] || extra=$(extra_leftovers)
        gone_ms=$(( ($(date +%s%N) - cg_start) / 1000000 ))
        if [ -z "$procs" ] && [ -z "$files" ] && [ -z "$extra" ]; then
            return 0
        fi
        [ "$gone_ms" -gt "$cg_limit" ] && break
        sleep 0.02
    done
    [ -n "$procs" ] && fail "$cg_what: processes left after $gone_ms ms: $procs"
    [ -n "$files" ] && fail "$cg_what: files left in $SOCKDIR after $gone_ms ms: $files"
    [ -n "$extra" ] && fail "$cg_what: after $gone_ms ms: $extra"
    return 1
}

# The pid of the process of this run (leftovers) named $1 (comm) whose
# environment holds $2 too (if given); empty if none.
proc_of() {
    for f in /proc/[0-9]*/environ; do
        grep -q -z -x -F "IVM_SOCKET_DIR=$SOCKDIR" "$f" 2>/dev/null || continue
        d=${f%/environ}
        [ "$(cat "$d/comm" 2>/dev/null)" = "$1" ] || continue
        if [ -n "$2" ] && ! grep -q -z -x -F "$2" "$f" 2>/dev/null; then
            continue
        fi
        echo "${d#/proc/}"
        return
    done
}

# Wait (60 s at most) until the file $1 holds a line starting with $2.
wait_line() {
    tries=0
    until grep -q "^$2" "$1" 2>/dev/null; do
        tries=$((tries + 1))
        [ $tries -ge 600 ] && return 1
        sleep 0.1
    done
    return 0
}

# The last run's status (rc) is $1, else fail with $2 and show its output.
expect_rc() {
    if [ "$rc" -ne "$1" ]; then
        fail "$2: exit status $rc, expected $1"
        sed 's/^/  | /' "$WORK/out" "$WORK/err"
        return 1
    fi
    return 0
}

# The cgroup directories of IVM daemons that are gone (CPU shares,
# common/cgroup.h: <cpu cgroup>/ivm/ivmd-<pid>-<starttime>), one per line.
stale_cgroups() {
    mnt=$(awk '$0 ~ / - cgroup / { n = split($NF, o, ","); for (i = 1; i <= n; i++)
              if (o[i] == "cpu") print $5 }' /proc/self/mountinfo | head -n 1)
    self=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ { print $3 }' /proc/self/cgroup | head -n 1)
    [ -n "$mnt" ] || return 0
    for d in "$mnt${self%/}"/ivm/ivmd-*; do
        [ -d "$d" ] || continue
        name=${d##*/ivmd-}
        pid=${name%%-*}
        start=${name#*-}
        now=$(cut -d' ' -f22 "/proc/$pid/stat" 2>/dev/null)
        [ "$now" = "$start" ] || echo "$d"
    done
}
