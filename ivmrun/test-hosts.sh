#!/bin/sh
# ivmrun --hosts / --hostfile on this machine: three "hosts" that are all
# localhost, brought up by mpirun and ivm-boot.
#   sh ivmrun/test-hosts.sh BIN_DIR [PE_FAULTS]
# BIN_DIR holds ivmrun, ivm-boot, ivmd, ivm-info (and vecadd, if built);
# PE_FAULTS is the tests' ivmt_pe_faults (the launcher-death cases need it).
# Exit status: 0 passed, 1 failed, 77 skipped (no mpirun, or no ivm-boot
# because MPI was not found at build time).
#
# Checks: the daemons form one cluster (ivm-info on node0 sees peers_up=2),
# an example program runs, PROGRAM's exit status passes through, --hostfile,
# --timeout, SIGTERM, a failed bring-up, a first host that is not this
# machine; SIGKILL of ivmrun, of mpirun and of one ivm-boot while a job holds
# a PE on every node (within two seconds nothing of the run is left, and no
# /dev/shm entry); the run directory of a SIGKILLed daemon swept by the next
# run; and after every run nothing is left: no process of the run
# (none has this run's IVM_SOCKET_DIR in its environment: ivmd, mpirun,
# ivm-boot, PEs) and no run directory or socket.

# Under ASan (the sanitizer pass of scripts/run-tests.sh): ivm-boot is an Open
# MPI program, whose plugins are unloaded at exit and leak where LeakSanitizer
# can name no library to suppress; memory errors are still reported.
if [ -n "${ASAN_OPTIONS:-}" ]; then
    export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
fi

BIN=${1:?usage: test-hosts.sh BIN_DIR [PE_FAULTS]}
BIN=$(cd "$BIN" && pwd) || exit 1
PE_FAULTS=${2:-}

if ! command -v "${IVM_MPIRUN:-mpirun}" >/dev/null 2>&1; then
    echo "SKIP: mpirun not found (install Open MPI to test ivmrun --hosts)"
    exit 77
fi
if [ ! -x "$BIN/ivm-boot" ]; then
    echo "SKIP: $BIN/ivm-boot not built (MPI was not found when configuring)"
    exit 77
fi
for prog in ivmrun ivmd ivm-info; do
    if [ ! -x "$BIN/$prog" ]; then
        echo "FAIL: $BIN/$prog missing"
        exit 1
    fi
done

# A private socket directory: it names this test's processes and files.
SOCKDIR=$(mktemp -d "${TMPDIR:-/tmp}/ivm-hosts.XXXXXX") || exit 1
chmod 700 "$SOCKDIR"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ivm-hosts-work.XXXXXX") || exit 1
trap 'rm -rf "$WORK"; rmdir "$SOCKDIR" 2>/dev/null' EXIT
failures=0

# fail, leftovers
. "$(dirname "$0")/test-lib.sh"


# ivmrun OPTIONS... PROGRAM...: output in $WORK/out, status in $rc.
run() {
    IVM_SOCKET_DIR=$SOCKDIR "$BIN/ivmrun" --timeout 120 "$@" >"$WORK/out" 2>"$WORK/err"
    rc=$?
}

HOSTS=localhost,localhost,localhost

# 1. One cluster of three daemons: node0 (where PROGRAM runs) sees two peers up.
run --hosts "$HOSTS" "$BIN/ivm-info"
if expect_rc 0 "ivm-info on node0"; then
    for want in node=node0 peers=2 peers_up=2; do
        grep -q -x "$want" "$WORK/out" || fail "ivm-info on node0: no '$want' in: $(tr '\n' ' ' <"$WORK/out")"
    done
fi
check_clean "ivm-info run"

# 2. Each node is its own daemon: ask node1 and node2 through node0's socket
#    directory layout (boot-node<k>-*/node<k>.sock).
run --hosts "$HOSTS" sh -c '
    for k in 0 1 2; do
        s=$(ls -d "$IVM_SOCKET_DIR"/boot-node$k-*/node$k.sock) || exit 10
        "$0" "$s" | grep -x -e "node=node$k" -e "peers_up=2" | tr "\n" " "; echo
    done' "$BIN/ivm-info"
if expect_rc 0 "every node's daemon"; then
    for k in 0 1 2; do
        grep -q -x "node=node$k peers_up=2 " "$WORK/out" ||
            fail "node$k's daemon is not up with two peers: $(tr '\n' '|' <"$WORK/out")"
    done
fi
check_clean "per-node run"

# 2b. --emu-gpus reaches every host's daemon (ivm-boot passes it to ivmd).
if [ -x "$BIN/ivm-gpud" ]; then
    run --hosts "$HOSTS" --emu-gpus 2:16M sh -c '
        for k in 0 1 2; do
            s=$(ls -d "$IVM_SOCKET_DIR"/boot-node$k-*/node$k.sock) || exit 10
            "$0" "$s" | grep -x -e "node=node$k" -e "gpus=2" -e "gpud_alive=1" | tr "\n" " "; echo
        done' "$BIN/ivm-info"
    if expect_rc 0 "--emu-gpus on every node"; then
        for k in 0 1 2; do
            grep -q -x "node=node$k gpus=2 gpud_alive=1 " "$WORK/out" ||
                fail "node$k's daemon has no two emulated GPUs: $(tr '\n' '|' <"$WORK/out")"
        done
    fi
    check_clean "--emu-gpus run"
fi

# 2c. CPU shares (CORES:PCT) reach every host's daemon through mpirun and
#     ivm-boot, ':' and all; each daemon enforces its own with cgroups, so
#     this needs cgroup CPU limits here (root; ivm-devrun is the probe).
if [ -x "$BIN/ivm-devrun" ] && "$BIN/ivm-devrun" --cpu-devices 0:50 -- true 2>/dev/null; then
    run --hosts "$HOSTS" --node-cpu-devices '0:80;0:40;0:20' sh -c '
        for k in 0 1 2; do
            s=$(ls -d "$IVM_SOCKET_DIR"/boot-node$k-*/node$k.sock) || exit 10
            "$0" "$s" | grep -e "^node=" -e "^cpu_device.0=" | tr "\n" " "; echo
        done' "$BIN/ivm-info"
    if expect_rc 0 "CPU shares on every node"; then
        k=0
        for pct in 80 40 20; do
            grep -q "^node=node$k cpu_device.0=cores=0 ncores=1 share=$pct " "$WORK/out" ||
                fail "node$k's daemon does not have a $pct% CPU device: $(tr '\n' '|' <"$WORK/out")"
            k=$((k + 1))
        done
    fi
    check_clean "CPU shares run"
    left=$(stale_cgroups)
    [ -z "$left" ] || fail "CPU shares run: cgroups of daemons that are gone: $left"
else
    echo "note: no cgroup CPU limits here (not root?); the CPU shares run left out"
fi

# 3. An example program.
if [ -x "$BIN/vecadd" ]; then
    run --hosts "$HOSTS" "$BIN/vecadd"
    expect_rc 0 "vecadd" && { grep -q "OK" "$WORK/out" || fail "vecadd printed no OK"; }
    check_clean "vecadd run"
else
    echo "note: $BIN/vecadd not built; example run left out"
fi

# 4. PROGRAM's exit status passes through.
run --hosts "$HOSTS" sh -c 'exit 7'
expect_rc 7 "exit status pass-through"
check_clean "exit 7 run"

# 5. --hostfile, Open MPI syntax: comments, slots=N, blank lines.
cat >"$WORK/hostfile" <<EOF
# three nodes on this machine
localhost slots=2    # node0: ivmrun runs here

localhost max_slots=4
   localhost
EOF
run --hostfile "$WORK/hostfile" "$BIN/ivm-info"
if expect_rc 0 "--hostfile"; then
    grep -q -x "peers_up=2" "$WORK/out" || fail "--hostfile: peers_up is not 2"
    # slots=/max_slots= reach the CLUSTER table: node0's own, and every peer's
    # as node0 holds them (max_slots alone: slots the same, as Open MPI).
    for want in "slots=2" "max_slots=0" \
        "peer.0=node=node0 address=.* up=1 self=1 slots=2 max_slots=0" \
        "peer.1=node=node1 address=.* up=1 self=0 slots=4 max_slots=4" \
        "peer.2=node=node2 address=.* up=1 self=0 slots=0 max_slots=0"; do
        grep -q -x "$want" "$WORK/out" ||
            fail "--hostfile: no '$want' in: $(tr '\n' '|' <"$WORK/out")"
    done
fi
check_clean "--hostfile run"

# 5b. node1's daemon holds the same table: its ivm-info shows its own slots.
run --hostfile "$WORK/hostfile" sh -c '
    s=$(ls -d "$IVM_SOCKET_DIR"/boot-node1-*/node1.sock) || exit 10
    "$0" "$s" | grep -x -e "slots=4" -e "max_slots=4" | tr "\n" " "; echo' "$BIN/ivm-info"
expect_rc 0 "--hostfile, node1's view" && { grep -q -x "slots=4 max_slots=4 " "$WORK/out" ||
    fail "--hostfile: node1's daemon does not hold slots=4 max_slots=4: $(cat "$WORK/out")"; }
check_clean "--hostfile node1 run"

# 5c. A bad slots line is refused before anything starts, naming file:line.
printf 'localhost slots=2\nlocalhost slots=3 max_slots=2\n' >"$WORK/badhostfile"
run --hostfile "$WORK/badhostfile" true
expect_rc 2 "--hostfile with max_slots < slots" &&
    { grep -q "badhostfile:2: max_slots=2 is below slots=3" "$WORK/err" ||
      fail "--hostfile bad line: $(cat "$WORK/err")"; }
check_clean "--hostfile bad line run"

# 6. --timeout: 124, and the cluster is stopped.
IVM_SOCKET_DIR=$SOCKDIR "$BIN/ivmrun" --hosts "$HOSTS" --timeout 3 sleep 60 \
    >"$WORK/out" 2>"$WORK/err"
rc=$?
expect_rc 124 "--timeout"
check_clean "--timeout run"

# 7. SIGTERM to ivmrun while PROGRAM runs: 143, and the cluster is stopped.
IVM_SOCKET_DIR=$SOCKDIR "$BIN/ivmrun" --hosts "$HOSTS" sh -c 'touch "$0"; sleep 60' \
    "$WORK/started" >"$WORK/out" 2>"$WORK/err" &
pid=$!
tries=0
while [ ! -e "$WORK/started" ] && [ $tries -lt 600 ]; do
    sleep 0.1
    tries=$((tries + 1))
done
[ -e "$WORK/started" ] || fail "SIGTERM: PROGRAM did not start within 60 s"
kill -TERM $pid
wait $pid
rc=$?
expect_rc 143 "SIGTERM"
check_clean "SIGTERM run"

# 8. A bring-up that fails (no ivmd): 1, and nothing left.
run --hosts "$HOSTS" --daemon /nonexistent/ivmd true
expect_rc 1 "missing ivmd"
grep -q "did not come up" "$WORK/err" || fail "missing ivmd: no 'did not come up' message"
check_clean "missing-ivmd run"

# 9. The first host must be this machine (the root PE runs on node0).
run --hosts nonexistent-host.invalid,localhost true
expect_rc 2 "remote first host"
grep -q "is not this machine" "$WORK/err" || fail "remote first host: no message saying why"
check_clean "remote-first-host run"

# 10. Launcher death: a job holds a PE on every node (pe_faults hold_nodes),
#     then SIGKILL of ivmrun (its guard kills the root, mpirun's input ends and
#     ivm-boot stops every daemon), of mpirun (the ranks lose their server and
#     stop their daemons; ivmrun kills the root and exits 1) or of node1's
#     ivm-boot (its ivmd gets SIGTERM, mpirun ends the others; ivmrun as for
#     mpirun). Within two seconds nothing of the run is left (processes, run
#     directories, sockets), no /dev/shm entry appeared (MPI's segments) and,
#     where cgroup CPU limits can be set (then the devices are shares), no
#     cgroup of a daemon that is gone.
kill_case() {
    what=$1
    ls /dev/shm | sort >"$WORK/shm_before"
    rm -f "$WORK/out" "$WORK/err"
    # shellcheck disable=SC2086 # $KILL_SHARES is an option and its value, or nothing
    IVM_SOCKET_DIR=$SOCKDIR "$BIN/ivmrun" --hosts "$HOSTS" $KILL_SHARES --timeout 100 \
        "$PE_FAULTS" hold_nodes >"$WORK/out" 2>"$WORK/err" &
    pid=$!
    if ! wait_line "$WORK/out" "PIDS "; then
        fail "SIGKILL of $what: the job never held its PEs: $(cat "$WORK/out" "$WORK/err")"
        kill -TERM $pid
        wait $pid
        check_clean "SIGKILL of $what (no job)"
        return
    fi
    [ "$(grep '^PIDS ' "$WORK/out" | wc -w)" -eq 5 ] ||
        fail "SIGKILL of $what: not a PE on each of the 3 nodes: $(grep '^PIDS ' "$WORK/out")"
    case $what in
        ivmrun) victim=$pid ;;
        mpirun) victim=$(proc_of mpirun) ;;
        ivm-boot) victim=$(proc_of ivm-boot OMPI_COMM_WORLD_RANK=1) ;;
    esac
    if [ -z "$victim" ]; then
        fail "SIGKILL of $what: no such process of the run"
        kill -TERM $pid
        wait $pid
        check_clean "SIGKILL of $what (no victim)"
        return
    fi
    start=$(date +%s%N)
    kill -KILL "$victim"
    if check_gone 2000 "$start" "SIGKILL of $what"; then
        echo "note: SIGKILL of $what: nothing of the run left after $gone_ms ms"
    fi
    wait $pid
    rc=$?
    if [ "$what" = ivmrun ]; then
        expect_rc 137 "SIGKILL of ivmrun"
    elif expect_rc 1 "SIGKILL of $what"; then
        grep -q "the cluster.s daemons are gone" "$WORK/err" ||
            fail "SIGKILL of $what: ivmrun did not say why: $(cat "$WORK/err")"
    fi
    # Criterion's own segments (bxfi_*, bxf_arena_*) belong to test programs
    # ctest runs beside this one, not to the run.
    shm_new=$(ls /dev/shm | sort | comm -13 "$WORK/shm_before" - 2>/dev/null |
        grep -v -E '^(bxfi_|bxf_arena_)' || true)
    [ -z "$shm_new" ] || fail "SIGKILL of $what: /dev/shm entries left: $shm_new"
    left=$(stale_cgroups)
    [ -z "$left" ] || fail "SIGKILL of $what: cgroups of daemons that are gone: $left"
}
# With cgroup CPU limits the nodes' devices are shares, so that the PEs sit in
# cgroups, which must go too.
KILL_SHARES=
if [ -x "$BIN/ivm-devrun" ] && "$BIN/ivm-devrun" --cpu-devices 0:50 -- true 2>/dev/null; then
    KILL_SHARES="--node-cpu-devices 0:60;0:60;0:60"
fi
if [ -n "$PE_FAULTS" ] && [ -x "$PE_FAULTS" ]; then
    for what in ivmrun mpirun ivm-boot; do
        kill_case $what
    done
else
    echo "note: no PE_FAULTS program given; the launcher-death runs left out"
fi

# 11. A run directory left by a daemon killed outright (SIGKILL gives it no
#     chance to remove it; Slurm kills so when srun dies) is removed by the
#     next ivm-boot on the host: it is unchanged for 10 s and nothing listens
#     on its socket.
stale=$SOCKDIR/boot-node1-stale
mkdir -m 700 "$stale"
"$BIN/ivmd" --socket "$stale/node1.sock" --ready-fd 3 3>"$WORK/ready" 2>/dev/null &
dpid=$!
tries=0
until [ -s "$WORK/ready" ] || [ $tries -ge 100 ]; do
    sleep 0.1
    tries=$((tries + 1))
done
kill -KILL $dpid
wait $dpid 2>/dev/null
touch -d '1 minute ago' "$stale/node1.sock" "$stale"
[ -S "$stale/node1.sock" ] || fail "stale run directory: the killed ivmd left no socket to sweep"
run --hosts "$HOSTS" true
expect_rc 0 "run after a killed daemon"
[ -e "$stale" ] && fail "the run directory of a killed daemon was not swept: $(ls -la "$stale")"
check_clean "run after a killed daemon"

if [ $failures -ne 0 ]; then
    echo "test-hosts: $failures failure(s)"
    exit 1
fi
echo "test-hosts: all passed"
exit 0
