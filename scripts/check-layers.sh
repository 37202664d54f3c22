#!/usr/bin/env bash
# The layering of ivmd (docs/architecture.md): calls go down only. Checks every
# ivmd/**/*.c and .h:
#   - an #include "..." names its own header, a header of its own layer or of a
#     lower one, or a header of common/ (or the public include/); system headers
#     (<...>) are free;
#   - no .c declares a prototype of an ivmd_ function that is not static (a way
#     around the headers: a call up the layers without an include).
# Prints each violation as FILE:LINE: what, and exits 1 if there is any.
#   usage: scripts/check-layers.sh [ROOT]   (ROOT: the tree, default this repository)
set -euo pipefail

root=${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"}
cd "$root"

layer_name() {
    case "$1" in
        1) echo transport ;;
        2) echo "control plane (ctl)" ;;
        3) echo "data plane (data)" ;;
        4) echo "GPU coherence (gpu)" ;;
        5) echo "service (ivmd/)" ;;
    esac
}

violations=0
report() {
    printf '%s:%s: %s\n' "$1" "$2" "$3"
    violations=$((violations + 1))
}

# The functions below answer in REPLY, not on stdout: a command substitution
# forks, and a fork per include line made this script take 9 s.

# The layer table (the shared plan's): the layer of a file under ivmd/ by its
# directory, lowest first, into REPLY ("" if not in the table). Top-level
# ivmd/*.c and *.h are the service layer.
layer_of_file() {
    local rel=${1#ivmd/} dir
    dir=${rel%/*}
    [[ "$dir" == "$rel" ]] && dir=.
    case "${dir%%/*}" in
        transport) REPLY=1 ;; # loop, conn, link, netlimits
        ctl)       REPLY=2 ;; # registry, spawn, pool, output, quota, teardown, remote
        data)      REPLY=3 ;; # copies, transfers, transport_ops, copy targets
        gpu)       REPLY=4 ;; # the ivm-gpud client, device copies as copy targets
        .)         REPLY=5 ;; # service: main, handlers, list
        *)         REPLY="" ;;
    esac
}

# Where #include "name" from file resolves, into REPLY: an ivmd/ path,
# "common", or "".
resolve_include() {
    local file=$1 name=$2 here
    here=${file%/*}
    if [[ -f "$here/$name" ]]; then
        REPLY="$here/$name"
    elif [[ -f "ivmd/$name" ]]; then
        REPLY="ivmd/$name"
    elif [[ -f "common/$name" || -f "common/$name.in" || -f "include/$name" ]]; then
        REPLY=common
    elif [[ "$name" == ivm_features.h ]]; then
        REPLY=common # generated from common/ivm_features.h.in
    else
        REPLY=""
    fi
}

include_re='^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)"'

check_includes() {
    local file=$1 mine own lineno line name target theirs
    layer_of_file "$file"
    mine=$REPLY
    own="${file%.*}.h"
    if [[ -z "$mine" ]]; then
        report "$file" 1 "not in a layer directory (ivmd/{transport,ctl,data,gpu}/ or ivmd/)"
        return
    fi
    lineno=0
    while IFS= read -r line || [[ -n "$line" ]]; do
        lineno=$((lineno + 1))
        [[ "$line" =~ $include_re ]] || continue
        name=${BASH_REMATCH[1]}
        resolve_include "$file" "$name"
        target=$REPLY
        if [[ -z "$target" ]]; then
            report "$file" "$lineno" "includes \"$name\", which is neither in ivmd/ nor in common/"
            continue
        fi
        if [[ "$target" == common || "$target" == "$own" ]]; then
            continue
        fi
        layer_of_file "$target"
        theirs=$REPLY
        if [[ -z "$theirs" ]]; then
            report "$file" "$lineno" "includes \"$name\", which is in no layer"
        elif ((theirs > mine)); then
            report "$file" "$lineno" "includes \"$name\" of the $(layer_name "$theirs") layer from the $(layer_name "$mine") layer (calls go down only)"
        fi
    done <"$file"
}

# Non-static prototypes of ivmd_ functions in a .c: top-level statements
# (starting in column 0, the name on their first line) that end with ';'
# before any '{' and declare ivmd_NAME(...).
check_prototypes() {
    awk -v file="$1" '
        function flush() {
            if (stmt != "" && stmt ~ /;[[:space:]]*$/ && stmt !~ /^(static|typedef)/ &&
                first ~ /(^|[^A-Za-z0-9_])ivmd_[A-Za-z0-9_]+[[:space:]]*\(/ && stmt !~ /=/) {
                printf "%s:%d: declares a prototype of an ivmd_ function in a .c (declare it in its module'"'"'s header)\n", file, start
            }
            stmt = ""
        }
        /^[[:space:]]*#/ { next }
        /^[A-Za-z_][A-Za-z0-9_]*:[[:space:]]*$/ { stmt = ""; next } # a goto label
        stmt == "" && /^[A-Za-z_]/ {
            stmt = $0; first = $0; start = NR
            if ($0 ~ /[;{]/) flush()
            next
        }
        stmt != "" { stmt = stmt " " $0; if ($0 ~ /[;{]/ || NR - start > 12) flush(); next }
    ' "$1"
}

while IFS= read -r file; do
    check_includes "$file"
    if [[ "$file" == *.c ]]; then
        while IFS= read -r hit; do
            printf '%s\n' "$hit"
            violations=$((violations + 1))
        done < <(check_prototypes "$file")
    fi
done < <(find ivmd -type f \( -name '*.c' -o -name '*.h' \) | sort)

if ((violations > 0)); then
    printf 'layering: %d violation(s)\n' "$violations" >&2
    exit 1
fi
exit 0
