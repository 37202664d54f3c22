#!/usr/bin/env bash
# Install what building and testing IVM needs, on Debian 12 (bookworm).
# Quiet and without effect when everything is already installed. As root, it
# installs what is missing with apt-get; otherwise it says what to install and
# fails. Set IVM_SKIP_DEPS=1 to skip the check altogether.
set -euo pipefail

packages=(build-essential cmake pkg-config libcriterion-dev libnuma-dev procps iproute2
          clang libclang-rt-14-dev
          openmpi-bin libopenmpi-dev slurm-wlm munge)

if [[ "${IVM_SKIP_DEPS:-0}" == 1 ]]; then
    exit 0
fi

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
