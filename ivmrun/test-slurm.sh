#!/bin/sh
# ivmrun --slurm on this machine: a private Slurm cluster (munged, slurmctld,
# one slurmd per node name, with their own state directories and ports; the
# "ivm" partition is this machine under its real host name, the "ivm3"
# partition adds it under two more names), and `salloc -N1 ivmrun --slurm ...`
# inside it, which starts the ivmd through srun and ivm-boot-srun.
#   sh ivmrun/test-slurm.sh BIN_DIR [PE_FAULTS]
# BIN_DIR holds ivmrun, ivm-boot-srun, ivmd, ivm-info (and vecadd, if built);
# PE_FAULTS is the tests' ivmt_pe_faults (the launcher-death cases need it).
# Exit status: 0 passed, 1 failed, 77 skipped (not root, or Slurm's
# slurmctld/slurmd/srun/salloc or munged missing).
#
# First, without Slurm: ivm-boot-srun alone, driven through its stdin/stdout
# (a whole exchange; malformed input). Then, under Slurm: the daemon comes up
# through srun (an ivm-boot-srun task of a Slurm step keeps it, no mpirun),
# with no secret in any command line or environment; an example program runs;
# PROGRAM's exit status passes through salloc; SIGTERM to ivmrun and to the
# task; a failed bring-up; --slurm outside an allocation; three nodes; SIGKILL
# of ivmrun and of srun while a job holds a PE on every node (within two
# seconds no process, run directory or socket of the run is left); and
# after every run nothing is left: no process of the run (none has this run's
# IVM_SOCKET_DIR in its environment: ivmd, srun, ivm-boot-srun), no run
# directory or socket, no job in the queue. At the end the Slurm daemons are
# stopped and their state removed.

BIN=${1:?usage: test-slurm.sh BIN_DIR [PE_FAULTS]}
BIN=$(cd "$BIN" && pwd) || exit 1
PE_FAULTS=${2:-}
PATH=$PATH:/usr/sbin:/sbin

for prog in ivmrun ivm-boot-srun ivmd ivm-info; do
    if [ ! -x "$BIN/$prog" ]; then
        echo "FAIL: $BIN/$prog missing"
        exit 1
    fi
done

# 0. Without Slurm: ivm-boot-srun as one task (the SLURM_* variables set by
#    hand), driven through its stdin and stdout as ivmrun drives it: a whole
#    exchange ends with UP and, at the end of input, exit 0; malformed input
#    ends it with 1 and a message. Nothing is left either way.
pre_fail=0
PRE=$(mktemp -d "${TMPDIR:-/tmp}/ivm-slurm-pre.XXXXXX") || exit 1
chmod 700 "$PRE"
mkdir "$PRE/sock" && chmod 700 "$PRE/sock"
task() {
    IVM_SOCKET_DIR=$PRE/sock SLURMD_NODENAME=localhost SLURM_PROCID=0 SLURM_NTASKS=1 \
        timeout 90 "$BIN/ivm-boot-srun" --hosts localhost "$@"
}
for bad in "garbage" "IVM-BOOT SECRET 0123" "IVM-BOOT NODE 7 127.0.0.1 1" "IVM-BOOT JOIN 0" ""; do
    printf '%s\n' "$bad" | task >"$PRE/out" 2>"$PRE/err"
    rc=$?
    if [ $rc -ne 1 ] || ! grep -q "error:" "$PRE/err"; then
        echo "FAIL: ivm-boot-srun given '$bad': exit status $rc, stderr: $(cat "$PRE/err")"
        pre_fail=1
    fi
done
mkfifo "$PRE/in"
task <"$PRE/in" >"$PRE/out" 2>"$PRE/err" &
tpid=$!
exec 3>"$PRE/in"
# Its daemon's start decides when NODE comes: on a loaded machine (the
# sanitizer pass) that can take seconds. The wait ends early if the task died.
tries=0
until grep -q "^IVM-BOOT NODE 0 " "$PRE/out" || ! kill -0 $tpid 2>/dev/null ||
    [ $tries -ge 600 ]; do
    sleep 0.1
    tries=$((tries + 1))
done
node=$(grep "^IVM-BOOT NODE 0 " "$PRE/out")
[ -n "$node" ] || { echo "FAIL: ivm-boot-srun by hand: no NODE line after $((tries / 10)) s: $(cat "$PRE/out" "$PRE/err")"; pre_fail=1; }
printf 'IVM-BOOT SECRET %s\n%s\nIVM-BOOT JOIN 0\n' \
    "$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" "$node" >&3
tries=0
until grep -q "^IVM-BOOT UP 0 /" "$PRE/out" || ! kill -0 $tpid 2>/dev/null ||
    [ $tries -ge 600 ]; do
    sleep 0.1
    tries=$((tries + 1))
done
grep -q "^IVM-BOOT JOINED 0$" "$PRE/out" && grep -q "^IVM-BOOT UP 0 /" "$PRE/out" ||
    { echo "FAIL: ivm-boot-srun by hand: no JOINED/UP: $(cat "$PRE/out" "$PRE/err")"; pre_fail=1; }
exec 3>&-
wait $tpid
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: ivm-boot-srun by hand: exit status $rc at the end of input: $(cat "$PRE/err")"; pre_fail=1; }
[ -z "$(ls -A "$PRE/sock")" ] || { echo "FAIL: ivm-boot-srun left $(ls -A "$PRE/sock")"; pre_fail=1; }
rm -rf "$PRE"
if [ $pre_fail -ne 0 ]; then
    exit 1
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: not root (the test starts its own munged, slurmctld and slurmd)"
    exit 77
fi
for prog in slurmctld slurmd srun salloc sinfo squeue scancel munged; do
    if ! command -v $prog >/dev/null 2>&1; then
        echo "SKIP: $prog not found (install slurm-wlm and munge to test ivmrun --slurm)"
        exit 77
    fi
done

T0=$(date +%s)
HOST=$(hostname)
# Slurm's own state, readable by all (munged wants its socket's directory so).
SL=$(mktemp -d "${TMPDIR:-/tmp}/ivm-slurm.XXXXXX") || exit 1
chmod 755 "$SL"
# A private socket directory: it names this test's processes and files.
SOCKDIR=$(mktemp -d "${TMPDIR:-/tmp}/ivm-slurm-sock.XXXXXX") || exit 1
chmod 700 "$SOCKDIR"
WORK=$SL/work
mkdir -p "$SL/munge" "$SL/spool" "$SL/state" "$SL/log" "$WORK"
failures=0

# fail, leftovers
. "$(dirname "$0")/test-lib.sh"

# The pid in file $1, if that process still runs.
pid_of() {
    [ -f "$1" ] || return 1
    p=$(cat "$1" 2>/dev/null)
    [ -n "$p" ] && kill -0 "$p" 2>/dev/null && echo "$p"
}

# Stop what this test started (by pid) and remove its state.
cleanup() {
    if [ -n "$SLURM_CONF" ] && [ -f "$SLURM_CONF" ]; then
        scancel --quiet --clusters=ivmtest --user=root 2>/dev/null ||
            scancel --quiet --user=root 2>/dev/null
    fi
    pids=
    for f in "$SL"/slurmd-*.pid "$SL/slurmctld.pid" "$SL/munge/munged.pid"; do
        p=$(pid_of "$f") && kill -TERM "$p" 2>/dev/null && pids="$pids $p"
    done
    tries=0
    for p in $pids; do
        while kill -0 "$p" 2>/dev/null && [ $tries -lt 100 ]; do
            sleep 0.1
            tries=$((tries + 1))
        done
        kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
    done
    rm -rf "$SL"
    rmdir "$SOCKDIR" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# A TCP port nobody listens on (random, checked against /proc/net/tcp*).
free_port() {
    while :; do
        port=$(( $(od -An -N2 -tu2 /dev/urandom) % 20000 + 30000 ))
        hex=$(printf '%04X' "$port")
        if ! grep -q -i ":$hex " /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
            echo "$port"
            return
        fi
    done
}
PORTS=
while [ $(echo $PORTS | wc -w) -lt 4 ]; do
    p=$(free_port)
    case " $PORTS " in *" $p "*) ;; *) PORTS="$PORTS $p" ;; esac
done
set -- $PORTS
CTLD_PORT=$1 SLURMD_PORT=$2 N1_PORT=$3 N2_PORT=$4

PLUGINDIR=
for d in /usr/lib/x86_64-linux-gnu/slurm-wlm /usr/lib/aarch64-linux-gnu/slurm-wlm \
         /usr/lib64/slurm /usr/lib/slurm; do
    [ -d "$d" ] && { PLUGINDIR=$d; break; }
done
[ -n "$PLUGINDIR" ] && PLUGINDIR_LINE="PluginDir=$PLUGINDIR"

dd if=/dev/urandom of="$SL/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 600 "$SL/munge/munge.key"
cat >"$SL/slurm.conf" <<EOF
ClusterName=ivmtest
SlurmctldHost=$HOST
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SL/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$SL/state
SlurmdSpoolDir=$SL/spool-%n
SlurmctldPidFile=$SL/slurmctld.pid
SlurmdPidFile=$SL/slurmd-%n.pid
SlurmctldLogFile=$SL/log/slurmctld.log
SlurmdLogFile=$SL/log/slurmd-%n.log
$PLUGINDIR_LINE
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
InactiveLimit=0
KillWait=5
MinJobAge=5
NodeName=$HOST CPUs=2 Port=$SLURMD_PORT State=UNKNOWN
NodeName=ivm-n1 NodeHostname=$HOST CPUs=2 Port=$N1_PORT State=UNKNOWN
NodeName=ivm-n2 NodeHostname=$HOST CPUs=2 Port=$N2_PORT State=UNKNOWN
PartitionName=ivm Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
PartitionName=ivm3 Nodes=$HOST,ivm-n1,ivm-n2 MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$SL/slurm.conf

if ! munged --socket="$SL/munge/munge.sock" --key-file="$SL/munge/munge.key" \
        --pid-file="$SL/munge/munged.pid" --log-file="$SL/munge/munged.log" \
        --seed-file="$SL/munge/munged.seed" --force; then
    fail "munged did not start: $(tail -n 5 "$SL/munge/munged.log" 2>/dev/null)"
    exit 1
fi
if ! slurmctld -c -f "$SLURM_CONF" || ! slurmd -f "$SLURM_CONF" -N "$HOST"; then
    fail "slurmctld or slurmd did not start: $(tail -n 5 "$SL"/log/*.log 2>/dev/null)"
    exit 1
fi
# Two more nodes on this machine (one slurmd each) for a three-node run; a
# Slurm built without support for several slurmd per host leaves them out.
slurmd -f "$SLURM_CONF" -N ivm-n1 2>/dev/null
slurmd -f "$SLURM_CONF" -N ivm-n2 2>/dev/null
tries=0
until [ "$(sinfo -h -p ivm -o %t 2>/dev/null)" = "idle" ]; do
    tries=$((tries + 1))
    if [ $tries -ge 200 ]; then
        fail "the Slurm node did not become idle within 20 s: $(sinfo 2>&1)"
        tail -n 20 "$SL"/log/*.log
        exit 1
    fi
    sleep 0.1
done
echo "note: Slurm up in $(( $(date +%s) - T0 )) s (slurmctld port $CTLD_PORT, slurmd port $SLURMD_PORT)"


# check_clean (test-lib.sh) also waits for this test's Slurm jobs to leave the
# queue, with five seconds of grace.
extra_leftovers() {
    jobs=$(squeue -h -o %i 2>/dev/null)
    [ -z "$jobs" ] || echo "jobs left in the queue: $jobs"
}
CLEAN_TRIES=50

# salloc -N1 ivmrun --slurm OPTIONS... PROGRAM...: output in $WORK/out, status in $rc.
run() {
    IVM_SOCKET_DIR=$SOCKDIR salloc --quiet -N1 "$BIN/ivmrun" --slurm --timeout 60 "$@" \
        >"$WORK/out" 2>"$WORK/err"
    rc=$?
}

# 1. The node's daemon is up and is the cluster's node0.
run "$BIN/ivm-info"
if expect_rc 0 "ivm-info on node0"; then
    for want in node=node0 peers=0; do
        grep -q -x "$want" "$WORK/out" || fail "ivm-info on node0: no '$want' in: $(tr '\n' ' ' <"$WORK/out")"
    done
fi
check_clean "ivm-info run"

# 2. Who keeps the daemon: an ivm-boot-srun task of a Slurm step (its
#    environment has SLURM_STEP_ID), no mpirun or ivm-boot; and no process of
#    the run carries a 64-hex-digit word (the secret) in argv or environment.
cat >"$WORK/who.sh" <<'EOF'
for f in /proc/[0-9]*/environ; do
    grep -q -z -x -F "IVM_SOCKET_DIR=$IVM_SOCKET_DIR" "$f" 2>/dev/null || continue
    d=${f%/environ}
    comm=$(cat "$d/comm" 2>/dev/null) || continue
    step=no
    grep -q -z "^SLURM_STEP_ID=" "$f" 2>/dev/null && step=yes
    echo "proc $comm step=$step"
    if tr '\0' '\n' <"$d/cmdline" | grep -q -E '[0-9a-fA-F]{64}' ||
       tr '\0' '\n' <"$f" | grep -q -E '[0-9a-fA-F]{64}'; then
        echo "secret-like word in $comm"
    fi
done
EOF
run sh "$WORK/who.sh"
if expect_rc 0 "process survey"; then
    grep -q -x "proc ivm-boot-srun step=yes" "$WORK/out" ||
        fail "no ivm-boot-srun task of a Slurm step: $(tr '\n' '|' <"$WORK/out")"
    grep -q -x "proc ivmd step=no" "$WORK/out" ||
        fail "no ivmd (without the step's variables): $(tr '\n' '|' <"$WORK/out")"
    grep -q -x "proc srun step=no" "$WORK/out" ||
        fail "no srun of the run: $(tr '\n' '|' <"$WORK/out")"
    if grep -q -E "^proc (mpirun|ivm-boot|orted|prterun) " "$WORK/out"; then
        fail "MPI took part: $(tr '\n' '|' <"$WORK/out")"
    fi
    if grep -q "^secret-like" "$WORK/out"; then
        fail "$(grep '^secret-like' "$WORK/out" | tr '\n' ' ')"
    fi
fi
check_clean "survey run"

# 2b. A CPU share (--cpu-devices CORES:PCT) reaches the daemon through srun
#     and ivm-boot-srun, ':' and all (needs cgroup CPU limits: ivm-devrun is
#     the probe).
if [ -x "$BIN/ivm-devrun" ] && "$BIN/ivm-devrun" --cpu-devices 0:50 -- true 2>/dev/null; then
    run --cpu-devices 0:30 "$BIN/ivm-info"
    if expect_rc 0 "a CPU share"; then
        grep -q "^cpu_device.0=cores=0 ncores=1 share=30 " "$WORK/out" ||
            fail "no 30% CPU device: $(tr '\n' '|' <"$WORK/out")"
    fi
    check_clean "CPU share run"
    left=$(stale_cgroups)
    [ -z "$left" ] || fail "CPU share run: cgroups of daemons that are gone: $left"
else
    echo "note: no cgroup CPU limits here (not root?); the CPU share run left out"
fi

# 3. An example program.
if [ -x "$BIN/vecadd" ]; then
    run "$BIN/vecadd"
    expect_rc 0 "vecadd" && { grep -q "OK" "$WORK/out" || fail "vecadd printed no OK"; }
    check_clean "vecadd run"
else
    echo "note: $BIN/vecadd not built; example run left out"
fi

# 4. PROGRAM's exit status passes through ivmrun and salloc.
run sh -c 'exit 7'
expect_rc 7 "exit status pass-through"
check_clean "exit 7 run"

# 5. SIGTERM to ivmrun while PROGRAM runs: 143, and the daemon, the task, srun
#    and the allocation are gone.
rm -f "$WORK/started"
IVM_SOCKET_DIR=$SOCKDIR salloc --quiet -N1 "$BIN/ivmrun" --slurm \
    sh -c 'echo $PPID >"$0.tmp"; mv "$0.tmp" "$0"; sleep 60' "$WORK/started" \
    >"$WORK/out" 2>"$WORK/err" &
spid=$!
tries=0
while [ ! -s "$WORK/started" ] && [ $tries -lt 300 ]; do
    sleep 0.1
    tries=$((tries + 1))
done
if [ -s "$WORK/started" ]; then
    kill -TERM "$(cat "$WORK/started")"
else
    fail "SIGTERM: PROGRAM did not start within 30 s"
    kill -TERM $spid
fi
wait $spid
rc=$?
expect_rc 143 "SIGTERM"
check_clean "SIGTERM run"

# 5b. SIGTERM to the ivm-boot-srun task itself (what scancel does): it stops
#     its daemon and removes its run directory while PROGRAM still runs;
#     ivmrun sees node0's daemon go, kills PROGRAM and exits 1, saying why.
cat >"$WORK/term-task.sh" <<'EOF'
task=
for f in /proc/[0-9]*/environ; do
    grep -q -z -x -F "IVM_SOCKET_DIR=$IVM_SOCKET_DIR" "$f" 2>/dev/null || continue
    d=${f%/environ}
    [ "$(cat "$d/comm" 2>/dev/null)" = ivm-boot-srun ] && task=${d#/proc/}
done
[ -n "$task" ] || { echo "no task"; exit 10; }
ls -d "$IVM_SOCKET_DIR"/boot-node0-* >/dev/null 2>&1 || { echo "no run dir"; exit 11; }
kill -TERM "$task"
tries=0
while ls -d "$IVM_SOCKET_DIR"/boot-node0-* >/dev/null 2>&1 || kill -0 "$task" 2>/dev/null; do
    tries=$((tries + 1))
    [ $tries -ge 100 ] && { echo "task or run dir still there 10 s after SIGTERM"; exit 12; }
    sleep 0.1
done
echo "task gone"
EOF
run sh "$WORK/term-task.sh"
if expect_rc 1 "SIGTERM to the task"; then
    grep -q "the cluster's daemons are gone (node0's daemon stopped)" "$WORK/err" ||
        fail "SIGTERM to the task: ivmrun did not say why: $(tr '\n' '|' <"$WORK/err")"
    grep -q -E "^(no task|no run dir|task or run dir still)" "$WORK/out" &&
        fail "SIGTERM to the task: $(tr '\n' '|' <"$WORK/out")"
fi
check_clean "task SIGTERM run"

# 6. A bring-up that fails (no ivmd): 1, and nothing left.
run --daemon /nonexistent/ivmd true
expect_rc 1 "missing ivmd"
grep -q "did not come up" "$WORK/err" || fail "missing ivmd: no 'did not come up' message"
check_clean "missing-ivmd run"

# 7. --slurm outside an allocation: a usage error that says why.
env -u SLURM_JOB_NODELIST IVM_SOCKET_DIR="$SOCKDIR" "$BIN/ivmrun" --slurm true \
    >"$WORK/out" 2>"$WORK/err"
rc=$?
expect_rc 2 "--slurm outside an allocation"
grep -q "SLURM_JOB_NODELIST is not set" "$WORK/err" ||
    fail "--slurm outside an allocation: no message saying why"
check_clean "no-allocation run"

# 8. Three nodes (this machine under three Slurm node names): one ivm-boot-srun
#    task and one ivmd per node, each daemon sees the two others, and the
#    example runs on the cluster.
tries=0
while [ "$(sinfo -h -N -p ivm3 -o %t 2>/dev/null | grep -c -x idle)" != 3 ] &&
      [ $tries -lt 100 ]; do
    sleep 0.1
    tries=$((tries + 1))
done
if [ "$(sinfo -h -N -p ivm3 -o %t 2>/dev/null | grep -c -x idle)" = 3 ]; then
    IVM_SOCKET_DIR=$SOCKDIR salloc --quiet -p ivm3 -N3 --ntasks-per-node=2 "$BIN/ivmrun" \
        --slurm --timeout 60 sh -c '
        for k in 0 1 2; do
            s=$(ls -d "$IVM_SOCKET_DIR"/boot-node$k-*/node$k.sock) || exit 10
            "$0" "$s" | grep -x -e "node=node$k" -e "peers_up=2" -e "slots=2" | tr "\n" " "
            echo
        done
        [ -x "$1" ] && "$1"' "$BIN/ivm-info" "$BIN/vecadd" >"$WORK/out" 2>"$WORK/err"
    rc=$?
    # --ntasks-per-node=2: SLURM_TASKS_PER_NODE=2(x3), each node's slots=2.
    if expect_rc 0 "three nodes"; then
        for k in 0 1 2; do
            grep -q -x "node=node$k peers_up=2 slots=2 " "$WORK/out" ||
                fail "three nodes: node$k's daemon is not up with two peers and slots=2: $(tr '\n' '|' <"$WORK/out")"
        done
        if [ -x "$BIN/vecadd" ]; then
            grep -q "OK" "$WORK/out" || fail "three nodes: vecadd printed no OK"
        fi
    fi
    check_clean "three-node run"
else
    echo "note: the nodes ivm-n1 and ivm-n2 did not come up (a Slurm without several" \
         "slurmd per host?); three-node run left out: $(sinfo -N -p ivm3 2>&1 | tr '\n' '|')"
fi

# 9. Launcher death: a job holds a PE on every node (pe_faults hold_nodes; the
#    three-node partition when it is there), then SIGKILL of ivmrun (its
#    guard kills the root; srun's input ends, every task stops its daemon) or
#    of srun (ivmrun sees node0's daemon stop or srun exit, kills the root and
#    exits 1). Within two seconds no process, run directory or socket of the
#    run is left; the allocation then leaves the queue.
kill_case() {
    what=$1
    rm -f "$WORK/out" "$WORK/err"
    IVM_SOCKET_DIR=$SOCKDIR salloc --quiet $ALLOC "$BIN/ivmrun" --slurm --timeout 100 \
        "$PE_FAULTS" hold_nodes >"$WORK/out" 2>"$WORK/err" &
    spid=$!
    if ! wait_line "$WORK/out" "PIDS "; then
        fail "SIGKILL of $what: the job never held its PEs: $(cat "$WORK/out" "$WORK/err")"
        kill -TERM $spid
        wait $spid
        check_clean "SIGKILL of $what (no job)"
        return
    fi
    [ "$(grep '^PIDS ' "$WORK/out" | wc -w)" -eq $((NODES + 2)) ] ||
        fail "SIGKILL of $what: not a PE on each of the $NODES nodes: $(grep '^PIDS ' "$WORK/out")"
    victim=$(proc_of "$what")
    if [ -z "$victim" ]; then
        fail "SIGKILL of $what: no such process of the run"
        kill -TERM $spid
        wait $spid
        check_clean "SIGKILL of $what (no victim)"
        return
    fi
    start=$(date +%s%N)
    kill -KILL "$victim"
    if check_gone 2000 "$start" "SIGKILL of $what" procs; then
        echo "note: SIGKILL of $what ($NODES nodes): nothing of the run left after $gone_ms ms"
    fi
    wait $spid
    rc=$?
    if [ "$what" = ivmrun ]; then
        # salloc reports its command's death its own way: the guard's word is checked
        grep -q "guard killed the root PE" "$WORK/err" ||
            fail "SIGKILL of ivmrun: the guard said nothing: $(cat "$WORK/err")"
    elif expect_rc 1 "SIGKILL of $what"; then
        grep -q "the cluster.s daemons are gone" "$WORK/err" ||
            fail "SIGKILL of $what: ivmrun did not say why: $(cat "$WORK/err")"
    fi
    check_clean "SIGKILL of $what"
}
if [ -n "$PE_FAULTS" ] && [ -x "$PE_FAULTS" ]; then
    if [ "$(sinfo -h -N -p ivm3 -o %t 2>/dev/null | grep -c -x idle)" = 3 ]; then
        ALLOC="-p ivm3 -N3" NODES=3
    else
        ALLOC="-N1" NODES=1
    fi
    for what in ivmrun srun; do
        kill_case $what
    done
else
    echo "note: no PE_FAULTS program given; the launcher-death runs left out"
fi

echo "note: whole test $(( $(date +%s) - T0 )) s"
if [ $failures -ne 0 ]; then
    echo "test-slurm: $failures failure(s)"
    exit 1
fi
echo "test-slurm: all passed"
exit 0
