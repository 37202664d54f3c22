#!/usr/bin/env bash
# bench/apps/run.sh: the applications of section 5.4, IVM against MPI, on one
# scenario (bench/apps/scenarios/*.conf: simulated nodes and their devices).
#
# For each app (nbody, dmm, nw: DS-LB, swept over --portions; himeno: OM-LB,
# swept over --max-per-dev) it runs the IVM version under
#   ivmrun --nodes N --node-cpu-devices SPEC
# and the MPI baseline with one rank per device, bound to that device's cores
# by a rankfile, on the same input, and writes into OUT_DIR:
#   results.csv, results.md  speedup IVM/MPI, PEs, load share per device
#   speedup.png/.svg         speedup against the number of PEs (Figure 5-5)
#   omlb.png/.svg            HIMENO's OM-LB PEs per device over the
#                            iterations, and the spread of the PEs' times
#                            (Figure 5-6)
#   machine.txt, logs/       the machine, the command, every run's output
# Apps that were not built are skipped with a message; so are the plots when
# gnuplot is missing (apt-get install gnuplot-nox).
#
# A scenario is a bash file of settings: NODES, NODE_CPU_DEVICES (ivmrun's
# --node-cpu-devices: "0-7;8-11;12-13" is three nodes of one device each),
# MIN_CORES, REQUIRES_GPU, IVMRUN_EXTRA, MPI_GPU_CPUSETS (one MPI+CUDA rank
# per GPU device, bound to these cores; they come first and get the apps'
# --gpu-ranks), MPI_EMU_GPU_CPUSETS (one CPU-kernel rank per emulated GPU
# device, bound to these cores: an emulated GPU's PEs run the CPU kernel on
# their node's cores), VERIFY (1: --verify),
# <APP>_ARGS (both versions), <APP>_PORTIONS / HIMENO_MAX_PER_DEV (the sweep),
# OMLB_SLOW (IVM_OMLB_SLOW for HIMENO, both versions), DESCRIPTION.
#
# usage: bench/apps/run.sh [-b BUILD_DIR] [-o OUT_DIR] [-a "APPS"] [-t SECONDS]
#                          [--force] SCENARIO
#   SCENARIO   a file, or a name in bench/apps/scenarios (two-core, ...)
#   -b         build directory (default: $IVM_BUILD_DIR or build)
#   -o         output directory (default: BUILD_DIR/bench-apps/SCENARIO)
#   -a         apps to run (default: "nbody dmm nw himeno")
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

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

while (($#)); do
    case $1 in
        -b) build=$2; shift 2 ;;
        -o) out=$2; shift 2 ;;
        -a) apps=$2; shift 2 ;;
        -t) limit=$2; shift 2 ;;
        --force) force=1; shift ;;
        -h|--help) usage ;;
        -*) echo "run.sh: unknown option $1" >&2; usage ;;
        *) [[ -z $scenario ]] || usage; scenario=$1; shift ;;
    esac
done
[[ -n $scenario ]] || usage
if [[ ! -f $scenario ]]; then
    scenario=$here/scenarios/${scenario%.conf}.conf
fi
if [[ ! -f $scenario ]]; then
    echo "run.sh: no scenario $scenario (see bench/apps/scenarios)" >&2
    exit 2
fi
build=$(cd "$build" && pwd)
bin=$build/bin
name=$(basename "$scenario" .conf)
out=${out:-$build/bench-apps/$name}

# The scenario's settings.
DESCRIPTION="" MIN_CORES=1 REQUIRES_GPU=0 NODES=1 NODE_CPU_DEVICES="" IVMRUN_EXTRA=""
MPI_GPU_CPUSETS="" MPI_EMU_GPU_CPUSETS="" VERIFY=0 OMLB_SLOW=""
NBODY_ARGS="" NBODY_PORTIONS="" DMM_ARGS="" DMM_PORTIONS="" NW_ARGS="" NW_PORTIONS=""
HIMENO_ARGS="" HIMENO_MAX_PER_DEV=""
# shellcheck source=/dev/null
source "$scenario"

if [[ ! -x $bin/ivmrun ]]; then
    echo "run.sh: $bin/ivmrun not found: build first (cmake --build $build)" >&2
    exit 1
fi
cores=$(nproc)
if ((cores < MIN_CORES && !force)); then
    echo "run.sh: scenario $name needs $MIN_CORES cores, this machine has $cores: skipped" \
         "(--force runs it anyway, on oversubscribed cores)" >&2
    exit 77
fi
if ((REQUIRES_GPU)); then
    if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "run.sh: scenario $name needs an NVIDIA GPU, none found: skipped" >&2
        exit 77
    fi
    if ! "$bin/ivmrun" --help 2>&1 | grep -q -- "${IVMRUN_EXTRA%% *}"; then
        echo "run.sh: scenario $name needs ivmrun ${IVMRUN_EXTRA%% *} (GPU PEs), which" \
             "this build lacks: skipped" >&2
        exit 77
    fi
fi
have_mpi=1
if ! command -v mpirun >/dev/null; then
    echo "run.sh: no mpirun: the MPI baselines are skipped" >&2
    have_mpi=0
fi

# One MPI rank per device, bound to its cores: the GPU ranks first (the
# apps' --gpu-ranks K makes ranks 0..K-1 MPI+CUDA), then the CPU devices in
# node order.
cpusets=()
gpu_ranks=0
for extra in $MPI_GPU_CPUSETS; do
    cpusets+=("$extra")
    gpu_ranks=$((gpu_ranks + 1))
done
IFS=';' read -ra node_specs <<<"$NODE_CPU_DEVICES"
for spec in "${node_specs[@]}"; do
    IFS=',' read -ra devs <<<"$spec"
    for dev in "${devs[@]}"; do
        cpusets+=("${dev//+/,}")
    done
done
# The emulated GPUs' ranks (the CPU kernel) last.
for extra in $MPI_EMU_GPU_CPUSETS; do
    cpusets+=("$extra")
done
ndevs=${#cpusets[@]}
if ((ndevs == 0)); then
    echo "run.sh: scenario $name gives no CPU devices (NODE_CPU_DEVICES)" >&2
    exit 2
fi

mkdir -p "$out/logs"
rankfile=$out/rankfile
: >"$rankfile"
for r in "${!cpusets[@]}"; do
    echo "rank $r=localhost slot=${cpusets[$r]}" >>"$rankfile"
done

ivmrun_cmd=("$bin/ivmrun" --timeout "$limit")
if ((NODES > 1)); then
    ivmrun_cmd+=(--nodes "$NODES" --node-cpu-devices "$NODE_CPU_DEVICES")
else
    ivmrun_cmd+=(--cpu-devices "$NODE_CPU_DEVICES")
fi
# shellcheck disable=SC2206
ivmrun_cmd+=($IVMRUN_EXTRA)
mpirun_cmd=(mpirun --allow-run-as-root --oversubscribe --rankfile "$rankfile"
            --mca rmaps_rank_file_physical 1 -np "$ndevs" -x IVM_OMLB_SLOW)

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "command: bench/apps/run.sh $orig_args"
    echo "scenario: $name: $DESCRIPTION"
    echo "machine: $(uname -srm), $cores cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
    echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "ivmrun: ${ivmrun_cmd[*]}"
    echo "mpirun: ${mpirun_cmd[*]}"
} >"$out/machine.txt"
cat "$out/machine.txt"

verify=()
((VERIFY)) && verify=(--verify)
failures=0

# field LOG KEY: KEY's value on the log's RESULT line ("" if none).
field() {
    sed -n "s/^RESULT .* $2=\([^ ]*\).*/\1/p" "$1" | tail -n 1
}

# run_one LOG CMD...: run under the time limit; 0 if it ended well with a
# RESULT line.
run_one() {
    local log=$1
    shift
    echo "\$ $*" >"$log"
    if ! timeout -k 10 "$((limit + 30))" "$@" >>"$log" 2>&1; then
        echo "run.sh: failed: $* (see $log)" >&2
        tail -n 5 "$log" >&2
        return 1
    fi
    if [[ -z $(field "$log" seconds) ]]; then
        echo "run.sh: no RESULT line from: $* (see $log)" >&2
        return 1
    fi
}

# Checksums agree: the same hex digits, or floats within 1e-4 relative.
same_checksum() {
    [[ -n $1 && -n $2 ]] || return 1
    [[ $1 == "$2" ]] && return 0
    awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b;
                                     exit !(d <= 1e-4 * m) }'
}

csv=$out/results.csv
echo "scenario,app,setting,ivm_pes,ivm_s,mpi_ranks,mpi_s,speedup,ivm_verified,mpi_verified,same_checksum,ivm_share,mpi_share" >"$csv"
rm -f "$out"/speedup_*.dat "$out/omlb.dat"

export IVM_OMLB_SLOW=""
for app in $apps; do
    upper=${app^^}
    args_var=${upper}_ARGS
    # shellcheck disable=SC2206
    args=(${!args_var} "${verify[@]}")
    if [[ $app == himeno ]]; then
        sweep_opt=--max-per-dev
        sweep_var=HIMENO_MAX_PER_DEV
        IVM_OMLB_SLOW=$OMLB_SLOW
    else
        sweep_opt=--portions
        sweep_var=${upper}_PORTIONS
        IVM_OMLB_SLOW=""
    fi
    if [[ ! -x $bin/$app ]]; then
        echo "run.sh: $app was not built ($bin/$app missing): skipped" >&2
        continue
    fi
    echo "== $app ${args[*]} (sweep $sweep_opt ${!sweep_var})"

    # The MPI baseline: one rank per device, the static equal split.
    mpi_log=$out/logs/$app-mpi.log
    mpi_s="" mpi_ok=0
    mpi_args=("${args[@]}")
    ((gpu_ranks > 0)) && mpi_args+=(--gpu-ranks "$gpu_ranks")
    if ((have_mpi)) && [[ -x $bin/$app-mpi ]]; then
        if run_one "$mpi_log" "${mpirun_cmd[@]}" "$bin/$app-mpi" "${mpi_args[@]}"; then
            mpi_s=$(field "$mpi_log" seconds)
            mpi_ok=1
        else
            failures=$((failures + 1))
        fi
    else
        echo "run.sh: no MPI baseline for $app (mpirun or $app-mpi missing)" >&2
        : >"$mpi_log"
    fi

    for setting in ${!sweep_var}; do
        ivm_log=$out/logs/$app-ivm-$setting.log
        if ! run_one "$ivm_log" "${ivmrun_cmd[@]}" "$bin/$app" "${args[@]}" \
                     "$sweep_opt" "$setting"; then
            failures=$((failures + 1))
            continue
        fi
        ivm_s=$(field "$ivm_log" seconds)
        pes=$(field "$ivm_log" pes)
        speedup=""
        if ((mpi_ok)); then
            speedup=$(awk -v m="$mpi_s" -v i="$ivm_s" 'BEGIN { printf "%.3f", m / i }')
            echo "$pes $speedup" >>"$out/speedup_$app.dat"
        fi
        same=no
        same_checksum "$(field "$ivm_log" checksum)" "$(field "$mpi_log" checksum)" && same=yes
        iv=$(field "$ivm_log" verified)
        mv=$(field "$mpi_log" verified)
        if ((VERIFY)) && [[ $iv != yes || ($mpi_ok == 1 && $mv != yes) ]]; then
            echo "run.sh: $app did not verify (ivm: $iv, mpi: $mv)" >&2
            failures=$((failures + 1))
        fi
        echo "$name,$app,$sweep_opt $setting,$pes,$ivm_s,$( ((mpi_ok)) && field "$mpi_log" pes),$mpi_s,$speedup,$iv,$mv,$same,\"$(field "$ivm_log" share)\",\"$(field "$mpi_log" share)\"" >>"$csv"
        printf '   %s %-3s PEs %-3s IVM %-9s s  MPI %-9s s  speedup %s\n' \
               "$sweep_opt" "$setting" "$pes" "$ivm_s" "${mpi_s:--}" "${speedup:--}"
    done
done

# Figure 5-6's data: the HIMENO run with the most PEs per device.
omlb_log=""
for setting in $HIMENO_MAX_PER_DEV; do
    [[ -s $out/logs/himeno-ivm-$setting.log ]] && omlb_log=$out/logs/himeno-ivm-$setting.log
done
omlb_names=()
if [[ -n $omlb_log ]]; then
    mapfile -t omlb_names < <(sed -n 's/^omlb: device [0-9]* \([^ ]*\).*/\1/p' "$omlb_log")
    sed -n 's/^OMLB iter=\([0-9]*\) pes=\([0-9,]*\) units=[0-9,]* tmax=\([0-9.e+-]*\) tstd=\([0-9.e+-]*\)$/\1 \2 \3 \4/p' \
        "$omlb_log" | tr ',' ' ' >"$out/omlb.dat"
fi

# The Markdown table.
{
    echo "Scenario \`$name\`: $DESCRIPTION. $(sed -n 's/^machine: //p' "$out/machine.txt")."
    echo
    echo "| app | setting | IVM PEs | IVM s | MPI ranks | MPI s | speedup IVM/MPI | verified IVM/MPI | same checksum | IVM share per device | MPI share per rank |"
    echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | --- |"
    tail -n +2 "$csv" | while IFS=, read -r _ app setting ipes is mranks ms sp iv mv same rest; do
        ishare=${rest%%\",\"*}
        mshare=${rest#*\",\"}
        printf '| %s | `%s` | %s | %s | %s | %s | %s | %s/%s | %s | %s | %s |\n' "$app" \
               "$setting" "$ipes" "$is" "${mranks:--}" "${ms:--}" "${sp:--}" "${iv:--}" \
               "${mv:--}" "$same" "${ishare#\"}" "${mshare%\"}"
    done
} >"$out/results.md"
echo
cat "$out/results.md"

# The plots.
if ! command -v gnuplot >/dev/null; then
    echo "run.sh: gnuplot not found (apt-get install gnuplot-nox): plots skipped" >&2
else
    plots=()
    for f in "$out"/speedup_*.dat; do
        [[ -s $f ]] && plots+=("'$f' using 1:2 with linespoints lw 2 title '$(basename "$f" .dat | sed 's/speedup_//')'")
    done
    for term in "pngcairo size 900,560" "svg size 900,560"; do
        ext=${term%% *}
        ext=${ext%cairo}
        if ((${#plots[@]})); then
            gnuplot <<EOF || echo "run.sh: gnuplot failed on speedup.$ext" >&2
set terminal $term
set output '$out/speedup.$ext'
set title "IVM speedup over the static MPI split ($name)"
set xlabel 'PEs (IVM: child PEs spawned)'
set ylabel 'speedup (MPI seconds / IVM seconds)'
set key outside right top
set grid
set yrange [0:*]
plot $(IFS=,; echo "${plots[*]}"), 1 with lines dt 2 lc rgb 'gray' title 'MPI'
EOF
        fi
        if [[ -s $out/omlb.dat ]]; then
            n=${#omlb_names[@]}
            gnuplot <<EOF || echo "run.sh: gnuplot failed on omlb.$ext" >&2
set terminal $term
set output '$out/omlb.$ext'
set multiplot layout 2,1 title "HIMENO with OM-LB ($name, $(basename "$omlb_log" .log))"
set xlabel 'iteration'
set ylabel 'PEs on the device'
set key outside right top
set grid
set yrange [0:*]
names = "${omlb_names[*]}"
plot for [i=1:$n] '$out/omlb.dat' using 1:(column(i+1)) with steps lw 2 title word(names, i)
set ylabel 'std. dev. of PE times (s)'
plot '$out/omlb.dat' using 1:(column($n + 3)) with linespoints title 'tstd'
unset multiplot
EOF
        fi
    done
    ls "$out"/*.png "$out"/*.svg 2>/dev/null || true
fi

if ((failures > 0)); then
    echo "run.sh: $failures run(s) failed or did not verify" >&2
    exit 1
fi
