#!/usr/bin/env bash
# Install what building and testing IVM needs, on Debian 12 (bookworm), by
# group. Quiet and without effect when everything is already installed. As
# root, it installs what is missing with apt-get; otherwise it says what to
# install and fails. Set IVM_SKIP_DEPS=1 to skip the check altogether.
#
#   scripts/install-deps.sh [GROUP...]     (default: build fuzz mpi slurm netns)
#   scripts/install-deps.sh --list         each group and its packages
#
# Groups:
#   build   compilers, CMake and Ninja, the libraries IVM links (hwloc, libnuma, OpenSSL;
#           UCX, optional: ivmd's RDMA transport; uthash, header-only) and what the tests and checks use (Criterion;
#           man to render the man pages; pmccabe for the complexity report)
#   fuzz    clang and its runtimes: the libFuzzer targets of tests/fuzz (the
#           sanitizer pass itself builds with the default compiler)
#   mpi     Open MPI: ivmrun --hosts (ivm-boot), the MPI baselines of apps/ and
#           bench/ (the tests skip what needs it, saying so, without it)
#   slurm   Slurm daemons and munge: the ivmrun --slurm test starts a private
#           one-node cluster (skipped without them)
#   netns   iproute2: the multi-node tests over network namespaces (skipped
#           without it)
#   plots   gnuplot: bench/apps/plot.sh draws the figures of docs/BENCHMARKS.md
set -euo pipefail

declare -A group=(
    [build]="build-essential cmake ninja-build pkg-config libcriterion-dev libhwloc-dev libnuma-dev libssl-dev libucx-dev uthash-dev pmccabe man-db groff-base"
    [fuzz]="clang libclang-rt-14-dev"
    [mpi]="openmpi-bin libopenmpi-dev"
    [slurm]="slurm-wlm munge"
    [netns]="iproute2"
    [plots]="gnuplot-nox"
)

order=(build fuzz mpi slurm netns plots)
if [[ "${1:-}" == --list ]]; then
    for g in "${order[@]}"; do
        echo "$g: ${group[$g]}"
    done
    exit 0
fi

if [[ "${IVM_SKIP_DEPS:-0}" == 1 ]]; then
    exit 0
fi

groups=("$@")
if ((${#groups[@]} == 0)); then
    groups=(build fuzz mpi slurm netns)
fi
packages=()
for g in "${groups[@]}"; do
    if [[ -z "${group[$g]+set}" ]]; then
        echo "install-deps: unknown group '$g' (${order[*]}; --list shows their packages)" >&2
        exit 2
    fi
    read -r -a pkgs <<<"${group[$g]}"
    packages+=("${pkgs[@]}")
done

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "install-deps: not a Debian system; make sure these (or their equivalents) are" \
         "installed: ${packages[*]}" >&2
    exit 0
fi

missing=()
for pkg in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    if [[ "$status" != installed ]]; then
        missing+=("$pkg")
    fi
done

if ((${#missing[@]} == 0)); then
    exit 0
fi

if [[ "$(id -u)" -ne 0 ]]; then
    echo "install-deps: missing packages: ${missing[*]}" >&2
    echo "install-deps: install them as root:" >&2
    echo "    apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
