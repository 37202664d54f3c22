#!/usr/bin/env bash
# bench/apps/run.sh: the applications of section 5.4, IVM against two MPI
# baselines, on one scenario (bench/apps/scenarios/*.conf: simulated nodes
# and their devices, whole cores or shares of a core's time).
#
# For each app and setting (nbody, dmm, nw: DS-LB, swept over --portions;
# himeno: OM-LB) it runs ROUNDS rounds of three runs on the same input, in
# turn, so that noise hits all three alike:
#   ivm    the IVM version, ivmrun --nodes N --node-cpu-devices SPEC
#          (or --cpu-devices SPEC on one node);
#   mpi    the MPI baseline with MPI's equal split, one rank per device;
#   mpiw   the MPI baseline given each rank's speed up front (--weights:
#          the device's share of a core x its cores), the best split a
#          static program that knows the machine can make.
# The MPI ranks run on exactly the devices IVM's PEs run on: ivm-devrun
# makes a cgroup per device with its share and pins each rank to its
# device's cores (scenarios with GPU ranks use a rankfile instead).
# SHARE_CHANGES ("T:DEV:PCT ...") change a device's share T seconds after a
# run started: ivm-ctl set-share on the device's node daemon for IVM,
# ivm-devrun --change for MPI (the weights stay the initial speeds: a static
# program cannot know).
#
# OUT_DIR gets:
#   runs.csv       every run: app, setting, round, variant, seconds, PEs,
#                  share per device, load average at the round's start, and
#                  for MPI runs each rank's measured speed share (its work
#                  over its seconds in the kernel)
#   summary.csv    per app and setting: medians, min and max of the three
#                  variants, of IVM's speedup over mpi and of its ratio to
#                  mpiw (each the round's ratio, so paired), the load, and
#                  the largest relative gap between a device's share of the
#                  work and its share of the speed, nominal and measured
#                  (the speed-weighted MPI runs' speed shares, median)
#   results.md     the summary as a table
#   speedup.png/.svg  speedup over equal-split MPI and ratio to speed-
#                  weighted MPI against IVM's PEs, min/max error bars
#   share.png/.svg IVM's share of the work per device against the devices'
#                  speed shares, nominal and measured
#   omlb.png/.svg  HIMENO's OM-LB: PEs and units per device over the run
#   machine.txt, logs/  the machine, the commands, every run's output
# Apps not built are skipped with a message; so are the plots without
# gnuplot (apt-get install gnuplot-nox).
#
# A scenario is a bash file of settings: DESCRIPTION, NODES, NODE_CPU_DEVICES
# (ivmrun's --node-cpu-devices: "0:80;1:40;1:20" is three nodes of one
# device each; with NODES=1 the --cpu-devices of the one node),
# SHARE_CHANGES, ROUNDS (default 5), MIN_CORES, NEEDS_CGROUP (1: shares),
# REQUIRES_GPU, IVMRUN_EXTRA, MPI_GPU_CPUSETS / MPI_EMU_GPU_CPUSETS (GPU
# ranks, bound by a rankfile), OMLB_SLOW (IVM_OMLB_SLOW, both versions),
# VERIFY (1: --verify), <APP>_ARGS (both versions), <APP>_SWEEP (values of
# <APP>_SWEEP_OPT, default --portions; HIMENO_SWEEP empty: one run).
#
# usage: bench/apps/run.sh [-b BUILD_DIR] [-o OUT_DIR] [-a "APPS"] [-r ROUNDS]
#                          [-t SECONDS] [--force] SCENARIO
#   SCENARIO   a file, or a name in bench/apps/scenarios (hetero-quota, ...)
#   -b         build directory (default: $IVM_BUILD_DIR or build)
#   -o         output directory (default: BUILD_DIR/bench-apps/SCENARIO)
#   -a         apps to run (default: "nbody dmm nw himeno")
#   -r         rounds (default: the scenario's ROUNDS, else 5)
#   -t         time limit of one run in seconds (default 300)
#   --force    run even with fewer cores than the scenario needs
# Exit status: 0; 77 when the scenario does not fit this machine; 1 when a
# run failed or did not verify; 2 for a bad command line.
set -euo pipefail

orig_args="$*"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${IVM_BUILD_DIR:-$root/build}
out=""
apps="nbody dmm nw himeno"
limit=300
force=0
scenario=""
rounds_opt=""

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

while (($#)); do
    case $1 in
        -b) build=$2; shift 2 ;;
        -o) out=$2; shift 2 ;;
        -a) apps=$2; shift 2 ;;
        -r) rounds_opt=$2; shift 2 ;;
        -t) limit=$2; shift 2 ;;
        --force) force=1; shift ;;
        -h|--help) usage ;;
        -*) echo "run.sh: unknown option $1" >&2; usage ;;
        *) [[ -z $scenario ]] || usage; scenario=$1; shift ;;
    esac
done
[[ -n $scenario ]] || usage
[[ -f $scenario ]] || scenario=$here/scenarios/${scenario%.conf}.conf
if [[ ! -f $scenario ]]; then
    echo "run.sh: no scenario $scenario (see bench/apps/scenarios)" >&2
    exit 2
fi
build=$(cd "$build" && pwd)
bin=$build/bin
name=$(basename "$scenario" .conf)
out=${out:-$build/bench-apps/$name}

# The scenario's settings.
DESCRIPTION="" MIN_CORES=1 REQUIRES_GPU=0 NEEDS_CGROUP=0 NODES=1 NODE_CPU_DEVICES=""
IVMRUN_EXTRA="" MPI_GPU_CPUSETS="" MPI_EMU_GPU_CPUSETS="" VERIFY=0 OMLB_SLOW=""
SHARE_CHANGES="" ROUNDS=5
NBODY_ARGS="" NBODY_SWEEP="" NBODY_SWEEP_OPT=--portions
DMM_ARGS="" DMM_SWEEP="" DMM_SWEEP_OPT=--portions
NW_ARGS="" NW_SWEEP="" NW_SWEEP_OPT=--portions
HIMENO_ARGS="" HIMENO_SWEEP="" HIMENO_SWEEP_OPT=--max-per-dev
# shellcheck source=/dev/null
source "$scenario"
rounds=${rounds_opt:-$ROUNDS}

for tool in ivmrun ivm-ctl ivm-devrun; do
    if [[ ! -x $bin/$tool ]]; then
        echo "run.sh: $bin/$tool not found: build first (cmake --build $build)" >&2
        exit 1
    fi
done
cores=$(nproc)
if ((cores < MIN_CORES && !force)); then
    echo "run.sh: scenario $name needs $MIN_CORES cores, this machine has $cores: skipped" \
         "(--force runs it anyway, on oversubscribed cores)" >&2
    exit 77
fi
if ((NEEDS_CGROUP)) && ! grep -qw cpu /proc/self/cgroup 2>/dev/null; then
    echo "run.sh: scenario $name needs the cgroup cpu controller (CPU shares): skipped" >&2
    exit 77
fi
if ((REQUIRES_GPU)); then
    if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "run.sh: scenario $name needs an NVIDIA GPU, none found: skipped" >&2
        exit 77
    fi
fi
have_mpi=1
if ! command -v mpirun >/dev/null; then
    echo "run.sh: no mpirun: the MPI baselines are skipped" >&2
    have_mpi=0
fi

# The devices in node order: their specs (CORES[:PCT]) and speeds (share x
# cores) for the MPI ranks; GPU ranks first (they get --gpu-ranks).
devspecs=() speeds=() devnode=() devlocal=() devnames=()
gpu_ranks=0
for extra in $MPI_GPU_CPUSETS; do
    devspecs+=("$extra") speeds+=(100) devnode+=(-1) devlocal+=(-1)
    gpu_ranks=$((gpu_ranks + 1))
done
IFS=';' read -ra node_specs <<<"$NODE_CPU_DEVICES"
for n in "${!node_specs[@]}"; do
    IFS=',' read -ra devs <<<"${node_specs[$n]}"
    for k in "${!devs[@]}"; do
        spec=${devs[$k]}
        pct=100
        [[ $spec == *:* ]] && pct=${spec##*:}
        ncores=0
        IFS='+' read -ra ranges <<<"${spec%%:*}"
        for r in "${ranges[@]}"; do
            if [[ $r == *-* ]]; then
                ncores=$((ncores + ${r#*-} - ${r%-*} + 1))
            else
                ncores=$((ncores + 1))
            fi
        done
        devspecs+=("$spec") speeds+=($((pct * ncores))) devnode+=("$n") devlocal+=("$k")
        devnames+=("node$n.cpu$k")
    done
done
for extra in $MPI_EMU_GPU_CPUSETS; do
    devspecs+=("$extra") speeds+=(100) devnode+=(-1) devlocal+=(-1)
done
ndevs=${#devspecs[@]}
if ((ndevs == 0)); then
    echo "run.sh: scenario $name gives no CPU devices (NODE_CPU_DEVICES)" >&2
    exit 2
fi
weights=$(IFS=,; echo "${speeds[*]}")

mkdir -p "$out/logs" "$out/sock"
chmod 700 "$out/sock"
export IVM_SOCKET_DIR=$out/sock
export IVM_OMLB_SLOW=$OMLB_SLOW

ivmrun_cmd=("$bin/ivmrun" --timeout "$limit")
if ((NODES > 1)); then
    ivmrun_cmd+=(--nodes "$NODES" --node-cpu-devices "$NODE_CPU_DEVICES")
else
    ivmrun_cmd+=(--cpu-devices "$NODE_CPU_DEVICES")
fi
# shellcheck disable=SC2206
ivmrun_cmd+=($IVMRUN_EXTRA)

# MPI: ivm-devrun's devices and share changes, or a rankfile for GPU ranks.
if [[ -z $MPI_GPU_CPUSETS$MPI_EMU_GPU_CPUSETS ]]; then
    devrun=("$bin/ivm-devrun" --cpu-devices "$(IFS=,; echo "${devspecs[*]}")")
    for c in $SHARE_CHANGES; do
        devrun+=(--change "$c")
    done
    mpirun_cmd=("${devrun[@]}" -- mpirun --allow-run-as-root --oversubscribe --bind-to none
                -np "$ndevs" -x IVM_OMLB_SLOW "$bin/ivm-devrun" --rank --)
else
    rankfile=$out/rankfile
    : >"$rankfile"
    for r in "${!devspecs[@]}"; do
        echo "rank $r=localhost slot=${devspecs[$r]//+/,}" >>"$rankfile"
    done
    mpirun_cmd=(mpirun --allow-run-as-root --oversubscribe --rankfile "$rankfile"
                --mca rmaps_rank_file_physical 1 -np "$ndevs" -x IVM_OMLB_SLOW)
fi

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "command: bench/apps/run.sh $orig_args"
    echo "scenario: $name: $DESCRIPTION"
    echo "machine: $(uname -srm), $cores cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
    echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "devices: ${devspecs[*]} (speeds ${speeds[*]}); share changes: ${SHARE_CHANGES:-none}"
    echo "rounds: $rounds"
    echo "ivm: IVM_SOCKET_DIR=$IVM_SOCKET_DIR ${ivmrun_cmd[*]}"
    echo "mpi: ${mpirun_cmd[*]} APP-mpi ARGS [--weights $weights]"
} >"$out/machine.txt"
cat "$out/machine.txt"

verify=()
((VERIFY)) && verify=(--verify)
failures=0

# field LOG KEY: KEY's value on the log's RESULT line ("" if none).
field() {
    sed -n "s/^RESULT .* $2=\([^ ]*\).*/\1/p" "$1" | tail -n 1
}

# speed_list LOG: the RESULT line's measured speeds, space-separated ("-"
# if none: IVM runs, baselines without per-rank timing).
speed_list() {
    local s
    s=$(field "$1" speed)
    echo "${s:--}" | tr ',' ' '
}

# ivm_changes: apply SHARE_CHANGES to the IVM run started now (background):
# device DEV (global index) is CPU device devlocal of node devnode's daemon.
ivm_changes() {
    local start=$SECONDS c t dev pct sock
    for c in $SHARE_CHANGES; do
        IFS=: read -r t dev pct <<<"$c"
        sleep "$(awk -v t="$t" -v e="$((SECONDS - start))" 'BEGIN { d = t - e; print (d > 0 ? d : 0) }')"
        if ((NODES > 1)); then
            sock=$(ls -d "$IVM_SOCKET_DIR"/run-*/node"${devnode[$dev]}".sock 2>/dev/null | head -n 1)
        else
            sock=$IVM_SOCKET_DIR/ivmd.sock
        fi
        "$bin/ivm-ctl" --socket "$sock" set-share "${devlocal[$dev]}" "$pct" ||
            echo "run.sh: ivm-ctl set-share ${devlocal[$dev]} $pct on $sock failed" >&2
    done
}

# run_one LOG CMD...: run under the time limit; 0 if it ended well with a
# RESULT line.
run_one() {
    local log=$1 rc=0 changer=""
    shift
    echo "\$ $*" >"$log"
    if [[ -n $SHARE_CHANGES && $1 == "$bin/ivmrun" ]]; then
        ivm_changes >>"$log" 2>&1 &
        changer=$!
    fi
    timeout -k 10 "$((limit + 30))" "$@" >>"$log" 2>&1 || rc=$?
    [[ -z $changer ]] || wait "$changer" 2>/dev/null || true
    if ((rc != 0)); then
        echo "run.sh: failed ($rc): $* (see $log)" >&2
        tail -n 5 "$log" >&2
        return 1
    fi
    if [[ -z $(field "$log" seconds) ]]; then
        echo "run.sh: no RESULT line from: $* (see $log)" >&2
        return 1
    fi
}

csv=$out/runs.csv
echo "app,setting,round,variant,seconds,pes,loadavg,verified,checksum,speed,share" >"$csv"
rm -f "$out"/omlb.dat

for app in $apps; do
    upper=${app^^}
    args_var=${upper}_ARGS sweep_var=${upper}_SWEEP opt_var=${upper}_SWEEP_OPT
    # shellcheck disable=SC2206
    args=(${!args_var} "${verify[@]}")
    if [[ ! -x $bin/$app ]]; then
        echo "run.sh: $app was not built ($bin/$app missing): skipped" >&2
        continue
    fi
    settings=${!sweep_var}
    [[ -n $settings ]] || settings=default
    mpi_ok=0
    ((have_mpi)) && [[ -x $bin/$app-mpi ]] && mpi_ok=1
    ((mpi_ok)) || echo "run.sh: no MPI baseline for $app (mpirun or $app-mpi missing)" >&2
    mpi_extra=()
    ((gpu_ranks > 0)) && mpi_extra+=(--gpu-ranks "$gpu_ranks")
    for setting in $settings; do
        set_args=()
        [[ $setting == default ]] || set_args=("${!opt_var}" "$setting")
        echo "== $app ${args[*]} ${set_args[*]}"
        for ((round = 1; round <= rounds; round++)); do
            load=$(cut -d' ' -f1 /proc/loadavg)
            variants=(ivm)
            ((mpi_ok)) && variants+=(mpi mpiw)
            for v in "${variants[@]}"; do
                log=$out/logs/$app-$setting-$v-$round.log
                case $v in
                    ivm) cmd=("${ivmrun_cmd[@]}" "$bin/$app" "${args[@]}" "${set_args[@]}") ;;
                    mpi) cmd=("${mpirun_cmd[@]}" "$bin/$app-mpi" "${args[@]}" "${set_args[@]}"
                              "${mpi_extra[@]}") ;;
                    mpiw) cmd=("${mpirun_cmd[@]}" "$bin/$app-mpi" "${args[@]}" "${set_args[@]}"
                               "${mpi_extra[@]}" --weights "$weights") ;;
                esac
                if ! run_one "$log" "${cmd[@]}"; then
                    failures=$((failures + 1))
                    continue
                fi
                if ((VERIFY)) && [[ $(field "$log" verified) != yes ]]; then
                    echo "run.sh: $app $v did not verify (see $log)" >&2
                    failures=$((failures + 1))
                fi
                echo "$app,$setting,$round,$v,$(field "$log" seconds),$(field "$log" pes),$load,$(field "$log" verified),$(field "$log" checksum),$(speed_list "$log"),\"$(field "$log" share)\"" >>"$csv"
            done
            printf '   round %d: ivm %s s, mpi %s s, mpiw %s s (load %s)\n' "$round" \
                   "$(field "$out/logs/$app-$setting-ivm-$round.log" seconds)" \
                   "$(field "$out/logs/$app-$setting-mpi-$round.log" seconds 2>/dev/null)" \
                   "$(field "$out/logs/$app-$setting-mpiw-$round.log" seconds 2>/dev/null)" "$load"
        done
    done
done

# The summary: per app and setting, medians (min, max) and the paired ratios.
cpu_speeds=()
for d in "${!devspecs[@]}"; do
    ((devnode[d] >= 0)) && cpu_speeds+=("${speeds[$d]}")
done
awk -F, -v speeds="${cpu_speeds[*]}" -v names="${devnames[*]}" -f "$here/summary.awk" "$csv" \
    >"$out/summary.csv"
{
    echo "Scenario \`$name\`: $DESCRIPTION. $(sed -n 's/^machine: //p' "$out/machine.txt")."
    echo "Each figure: median of the rounds (min-max); speedup = MPI equal split / IVM and"
    echo "vs weighted = MPI speed-weighted / IVM, each the ratio of one round's runs."
    echo
    echo "Share gaps: the largest relative gap between a device's share of IVM's work and its"
    echo "share of the nominal speeds (the scenario's), then of the speeds measured: each"
    echo "device's work per second in its kernel in the speed-weighted MPI runs (median)."
    echo
    echo "| app | setting | IVM PEs | IVM s | MPI s | MPI weighted s | speedup over MPI | vs weighted MPI | load | IVM share per device (median) | gap vs nominal | measured speed shares | gap vs measured |"
    echo "| --- | --- | ---: | --- | --- | --- | --- | --- | ---: | --- | ---: | --- | ---: |"
    tail -n +2 "$out/summary.csv" | while IFS=, read -r app setting pes im imn imx mm mmn mmx wm wmn wmx sp spn spx rw rwn rwx load share gap mspeed mgap; do
        printf '| %s | %s | %s | %s (%s-%s) | %s (%s-%s) | %s (%s-%s) | **%s** (%s-%s) | **%s** (%s-%s) | %s | %s | %s | %s | %s |\n' \
               "$app" "$setting" "$pes" "$im" "$imn" "$imx" "$mm" "$mmn" "$mmx" "$wm" "$wmn" "$wmx" \
               "$sp" "$spn" "$spx" "$rw" "$rwn" "$rwx" "$load" "$share" "$gap" "$mspeed" "$mgap"
    done
} >"$out/results.md"
echo
cat "$out/results.md"

# Figure 5-6's data: the last HIMENO IVM run's OMLB lines.
omlb_log=$(ls -t "$out"/logs/himeno-*-ivm-*.log 2>/dev/null | head -n 1 || true)
omlb_names=()
if [[ -n $omlb_log ]]; then
    mapfile -t omlb_names < <(sed -n 's/^omlb: device [0-9]* \([^ ]*\).*/\1/p' "$omlb_log")
    sed -n 's/^OMLB iter=[0-9]* last=\([0-9]*\) pes=\([0-9,]*\) units=\([0-9,]*\) .*/\1 \2 \3/p' \
        "$omlb_log" | tr ',' ' ' >"$out/omlb.dat"
fi

if ! command -v gnuplot >/dev/null; then
    echo "run.sh: gnuplot not found (apt-get install gnuplot-nox): plots skipped" >&2
else
    bash "$here/plot.sh" "$out" "$name" "$DESCRIPTION" "${omlb_names[*]}" || echo "run.sh: plots failed" >&2
fi

rm -rf "$out/sock"
if ((failures > 0)); then
    echo "run.sh: $failures run(s) failed or did not verify" >&2
    exit 1
fi
