#!/bin/sh
# Run the micro-benchmarks under ivmrun and print their tables. Builds nothing.
#   bench/run-micro.sh [BUILD_DIR (build)]
# DPC_RUNS (200), SYNC_BATCHES (1000) and SYNC_CALLS (1000) set the sizes.
# bench-dpc runs under --nodes DPC_NODES (2) so it prints both the local row
# and the node1 row; DPC_NODES=1 gives the local row only. It prints the cold
# rows and then the warm-pool rows (DPC_POOL, default 2; 0: none) of one run.
# DPC_GPUS picks the nodes' GPUs for the GPU rows (cold and warm local-gpu):
# emu (default: one emulated GPU each, ivmrun --emu-gpus 1; no CUDA context
# cost), real (the real GPUs, ivmrun --gpus all: the cuda rows) or none.
# Then ivm-perftest --op all on 2 nodes (PERFTEST_SIZES, default 8,4K,64K,1M).
# Node-to-node sync: bench/run-remote.sh.
set -eu

build=${1:-${BUILD_DIR:-build}}
ivmrun=$build/bin/ivmrun
for prog in "$ivmrun" "$build/bin/bench-dpc" "$build/bin/bench-sync-local"; do
    if [ ! -x "$prog" ]; then
        echo "run-micro.sh: $prog not found; build first (cmake --build $build)" >&2
        exit 1
    fi
done

case ${DPC_GPUS:-emu} in
    emu) gpus="--emu-gpus 1" ;;
    real) gpus="--gpus all" ;;
    none) gpus="" ;;
    *) echo "run-micro.sh: DPC_GPUS must be emu, real or none" >&2; exit 2 ;;
esac
echo "== DPC latency =="
# shellcheck disable=SC2086 # $gpus is an option and its value, or nothing
"$ivmrun" --nodes "${DPC_NODES:-2}" $gpus "$build/bin/bench-dpc" -n "${DPC_RUNS:-200}" \
    -p "${DPC_POOL:-2}"
echo
echo "== local sync (master copy) =="
"$ivmrun" "$build/bin/bench-sync-local" -b "${SYNC_BATCHES:-1000}" -c "${SYNC_CALLS:-1000}"
echo
echo "== ivm-perftest: every operation between node1 and node0's master =="
if [ -x "$build/bin/ivm-perftest" ]; then
    "$ivmrun" --nodes 2 "$build/bin/ivm-perftest" --op all --size "${PERFTEST_SIZES:-8,4K,64K,1M}"
else
    echo "run-micro.sh: no $build/bin/ivm-perftest (skipped)"
fi
