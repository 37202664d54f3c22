#!/usr/bin/env bash
# scripts/check-layers.sh: passes a tree whose includes go down only, and fails,
# naming FILE:LINE, on an upward include and on an ivmd_ prototype in a .c;
# on a copy of the real tree, an upward include added to the transport is
# reported.
#   usage: tests/scripts/test-check-layers.sh SOURCE_DIR
set -uo pipefail

src=${1:?usage: $0 SOURCE_DIR}
check="$src/scripts/check-layers.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ivm-layers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
    printf 'FAIL: %s\n' "$*"
    failures=$((failures + 1))
}

# A small layered tree: transport <- ctl <- service.
make_tree() {
    rm -rf "$tmp/t"
    mkdir -p "$tmp/t/ivmd/transport" "$tmp/t/ivmd/ctl" "$tmp/t/common"
    printf '#define LOG 1\n' >"$tmp/t/common/log.h"
    printf 'void ivmd_a_run(void);\n' >"$tmp/t/ivmd/transport/a.h"
    printf '#include <stdio.h>\n#include "transport/a.h"\n#include "log.h"\n\nstatic void ivmd_a_helper(void);\n\nvoid ivmd_a_run(void)\n{\n}\n' \
        >"$tmp/t/ivmd/transport/a.c"
    printf '#include "transport/a.h"\nvoid ivmd_b_run(void);\n' >"$tmp/t/ivmd/ctl/b.h"
    printf '#include "ctl/b.h"\n\nvoid ivmd_b_run(void)\n{\nout:\n    ivmd_a_run();\n}\n' \
        >"$tmp/t/ivmd/ctl/b.c"
    printf '#include "ctl/b.h"\n#include "transport/a.h"\n\nint main(void)\n{\n    ivmd_b_run();\n    return 0;\n}\n' \
        >"$tmp/t/ivmd/main.c"
}

make_tree
out=$(bash "$check" "$tmp/t" 2>&1) || fail "a tree whose includes go down fails: $out"

make_tree
printf '#include "ctl/b.h"\n' >>"$tmp/t/ivmd/transport/a.c"
if out=$(bash "$check" "$tmp/t" 2>&1); then
    fail "an include from the transport up to ctl passes"
fi
grep -q '^ivmd/transport/a.c:10: includes "ctl/b.h" of the control plane (ctl) layer from the transport layer' <<<"$out" ||
    fail "the upward include is not named by FILE:LINE: $out"

make_tree
printf '#include "main.h"\n' >>"$tmp/t/ivmd/ctl/b.h"
printf 'int x;\n' >"$tmp/t/ivmd/main.h"
if out=$(bash "$check" "$tmp/t" 2>&1); then
    fail "a header of ctl including a service header passes"
fi
grep -q '^ivmd/ctl/b.h:3: includes "main.h" of the service' <<<"$out" ||
    fail "the service include is not named: $out"

make_tree
printf 'void ivmd_b_run(void);\n' >>"$tmp/t/ivmd/transport/a.c"
if out=$(bash "$check" "$tmp/t" 2>&1); then
    fail "a prototype of an ivmd_ function in a .c passes"
fi
grep -q '^ivmd/transport/a.c:10: declares a prototype' <<<"$out" ||
    fail "the prototype is not named by FILE:LINE: $out"

# The real tree, with one upward include added to the event loop.
mkdir -p "$tmp/real"
cp -r "$src/ivmd" "$src/common" "$tmp/real/"
[[ -d "$src/include" ]] && cp -r "$src/include" "$tmp/real/"
lines=$(wc -l <"$tmp/real/ivmd/transport/loop.c")
printf '#include "ivmd.h"\n' >>"$tmp/real/ivmd/transport/loop.c"
if out=$(bash "$check" "$tmp/real" 2>&1); then
    fail "the real tree with the loop including ivmd.h passes"
fi
grep -q "^ivmd/transport/loop.c:$((lines + 1)): includes \"ivmd.h\" of the service" <<<"$out" ||
    fail "the loop's upward include is not reported: $out"

if ((failures > 0)); then
    exit 1
fi
echo "check-layers: all cases behave"
