#!/usr/bin/env bash
# Build IVM and run its demo on this machine: Listing 5-1 (vecadd), then a
# DS-LB chain (dslb) over two CPU devices made from the cores available, then
# the HIMENO application balanced by OM-LB over three simulated nodes whose
# devices are 80 %, 40 % and 20 % of a core (its RESULT line and the share of
# the work per device).
# Installs the dependencies first when run as root on Debian 12.
#   IVM_BUILD_DIR      build directory (default: build)
#   IVM_SKIP_DEPS=1    do not check the dependencies
#   IVM_DEMO_TIMEOUT   seconds each demo may run (default: 300)
#   IVM_CPU_DEVICES    CPU device spec to use instead of the computed one
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${IVM_BUILD_DIR:-build}
bin="$build_dir/bin"

step() {
    printf '\n==> %s\n' "$*"
}

# Join sorted core numbers into "+"-joined ranges: 0 1 2 5 -> 0-2+5.
cores_to_ranges() {
    local out="" start="" prev="" c
    for c in "$@"; do
        if [[ -n "$prev" && "$c" -eq $((prev + 1)) ]]; then
            prev=$c
            continue
        fi
        if [[ -n "$start" ]]; then
            out+="${out:++}$start"
            [[ "$prev" != "$start" ]] && out+="-$prev"
        fi
        start=$c
        prev=$c
    done
    if [[ -n "$start" ]]; then
        out+="${out:++}$start"
        [[ "$prev" != "$start" ]] && out+="-$prev"
    fi
    printf '%s\n' "$out"
}

# Two CPU devices splitting the cores this process may run on ("0,1" on two
# cores, "0-7,8-15" on sixteen); one device "0" with a single core.
cpu_devices() {
    local list part lo hi c half
    local -a parts
    local -a cores=()
    list=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status 2>/dev/null || true)
    if [[ -z "$list" ]]; then
        list="0-$(($(nproc) - 1))"
    fi
    IFS=, read -ra parts <<<"$list"
    for part in "${parts[@]}"; do
        lo=${part%-*}
        hi=${part#*-}
        for ((c = lo; c <= hi; c++)); do
            cores+=("$c")
        done
    done
    if ((${#cores[@]} < 2)); then
        printf '%s\n' "${cores[0]}"
        return
    fi
    half=$(((${#cores[@]} + 1) / 2))
    printf '%s,%s\n' "$(cores_to_ranges "${cores[@]:0:half}")" \
                     "$(cores_to_ranges "${cores[@]:half}")"
}

# run_demo TITLE NODES PROGRAM [ARGS...]: run one program as the root PE under
# ivmrun, every node with the CPU devices $devices (or, when demo_devices is
# set, ivmrun's --node-cpu-devices demo_devices: one spec per node).
failures=0
demo_devices=""
run_demo() {
    local title=$1 nodes=$2 program=$3
    shift 3
    local -a devs=(--cpu-devices "$devices")
    [[ -n $demo_devices ]] && devs=(--node-cpu-devices "$demo_devices")
    local -a cmd=("$bin/ivmrun" --nodes "$nodes" --tag-output "${devs[@]}"
                  "$bin/$program" "$@")
    printf '\n=== %s ===\n$ %s\n' "$title" "${cmd[*]}"
    if [[ ! -x "$bin/$program" ]]; then
        echo "run-demo: $bin/$program was not built" >&2
        failures=$((failures + 1))
        return
    fi
    local status=0
    timeout -k 10 "${IVM_DEMO_TIMEOUT:-300}" "${cmd[@]}" || status=$?
    if ((status != 0)); then
        echo "run-demo: $program failed (exit status $status)" >&2
        failures=$((failures + 1))
    fi
}

step "checking dependencies: scripts/install-deps.sh"
bash scripts/install-deps.sh build mpi

. scripts/cmake-generator.sh

step "configuring: cmake -S . -B $build_dir -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIVM_BUILD_TESTS=ON"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIVM_BUILD_TESTS=ON

step "building: cmake --build $build_dir -j$(nproc)"
cmake --build "$build_dir" -j"$(nproc)"

devices=${IVM_CPU_DEVICES:-$(cpu_devices)}
step "running the demo on CPU devices $devices"

# The demos, on simulated nodes (one ivmd each, joined over loopback TCP).
# To change the demo, change these lines: TITLE NODES PROGRAM [ARGS].
run_demo "Listing 5-1: vector addition by two child PEs on node1 (vecadd)" 2 vecadd \
    --host node1
run_demo "DS-LB over 3 nodes: chains of PEs that each spawn the next (dslb)" 3 dslb \
    60 2 --all-nodes

# HIMENO with OM-LB on three nodes whose devices run at 4 : 2 : 1: shares of
# the cores' time (80 %, 40 %, 20 %), which each node's ivmd enforces with a
# cgroup CPU limit (root, or a delegated cgroup, with the cpu controller).
# OM-LB measures the speeds and moves planes until each device's share of the
# work matches its speed: the OMLB lines show the planes per device, the
# RESULT line the share of the work per device. Without cgroup CPU limits,
# two whole-core devices, node1's made 3x slower by the IVM_OMLB_SLOW knob.
if [[ -x $bin/himeno ]]; then
    read -ra cores <<<"$(tr ',+-' '   ' <<<"$devices")"
    c0=${cores[0]} c1=${cores[${#cores[@]} - 1]}
    if [[ $(id -u) == 0 ]] && grep -Eq '^[0-9]+:([^:]*,)?cpu(,[^:]*)?:' /proc/self/cgroup; then
        demo_devices="$c0:80;$c1:40;$c1:20"
        run_demo "OM-LB HIMENO on 3 nodes of devices at 80 %, 40 %, 20 % of a core (himeno)" 3 \
            himeno --size 49 --iters 300 --verify
    else
        demo_devices="$c0;$c1"
        export IVM_OMLB_SLOW=1:3
        run_demo "OM-LB HIMENO on 2 nodes, node1's device slowed 3x (himeno)" 2 himeno \
            --size 49 --iters 100 --verify
        unset IVM_OMLB_SLOW
    fi
else
    echo "run-demo: $bin/himeno was not built (IVM_BUILD_APPS=OFF, or no OpenMP): HIMENO" \
         "demo skipped" >&2
fi
demo_devices=""

if ((failures > 0)); then
    step "$failures demo(s) failed"
    exit 1
fi
step "demo finished"
