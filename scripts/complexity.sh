#!/usr/bin/env bash
# Complexity report: the functions of ivmd/ (every directory below it),
# ivmrun/, libivm/ and common/ that are longer than 80 lines or have a
# cyclomatic complexity above 20 (pmccabe's modified CCN, its first column),
# one line each: "file:line function ccn N lines N". Those listed in
# scripts/complexity-exceptions.txt (a function name and the one-line reason
# it is kept) are marked "kept: reason"; an exception that matches nothing is
# reported too, so the list does not outlive its functions.
# A report only: the exit status is 0 whatever it finds (pmccabe missing
# included), unless IVM_COMPLEXITY_STRICT=1, which exits 1 when a function
# over the limits is not kept.
#   IVM_COMPLEXITY_MAX_LINES  lines limit (default 80)
#   IVM_COMPLEXITY_MAX_CCN    complexity limit (default 20)
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
max_lines=${IVM_COMPLEXITY_MAX_LINES:-80}
max_ccn=${IVM_COMPLEXITY_MAX_CCN:-20}
exceptions=scripts/complexity-exceptions.txt
dirs=(ivmd ivmrun libivm common)

if ! command -v pmccabe >/dev/null 2>&1; then
    echo "complexity: pmccabe is not installed (scripts/install-deps.sh, build group); no report"
    exit 0
fi
mapfile -t files < <(find "${dirs[@]}" -name '*.c' -type f 2>/dev/null | LC_ALL=C sort)
if ((${#files[@]} == 0)); then
    echo "complexity: no C files under ${dirs[*]}"
    exit 0
fi
[[ -f $exceptions ]] || exceptions=/dev/null

# pmccabe: "mccabe<TAB>traditional<TAB>statements<TAB>first line<TAB>lines<TAB>
# file(line): function"; a function it takes for a member of a struct it
# misread is "struct::function".
pmccabe "${files[@]}" 2>/dev/null | awk -F'\t' -v max_lines="$max_lines" -v max_ccn="$max_ccn" \
    -v exc="$exceptions" -v dirs="${dirs[*]}" -v strict="${IVM_COMPLEXITY_STRICT:-0}" '
BEGIN {
    while ((getline line < exc) > 0) {
        if (line ~ /^[ \t]*(#|$)/) {
            continue
        }
        name = line
        sub(/[ \t].*$/, "", name)
        reason = line
        sub(/^[^ \t]+[ \t]*/, "", reason)
        kept[name] = reason != "" ? reason : "(no reason given)"
    }
}
$1 > max_ccn || $5 > max_lines {
    where = $6
    fn = where
    sub(/^.*\): /, "", fn)
    sub(/^.*::/, "", fn)
    sub(/\): .*$/, "", where)
    sub(/\(/, ":", where)
    row = sprintf("  %s %s ccn %d lines %d", where, fn, $1, $5)
    if (fn in kept) {
        row = row "  [kept: " kept[fn] "]"
        used[fn] = 1
        ++nkept
    }
    rows[++n] = row
}
END {
    printf "complexity: functions over %d lines or CCN %d in %s (pmccabe)\n", max_lines,
           max_ccn, dirs
    for (i = 1; i <= n; ++i) {
        print rows[i]
    }
    for (fn in kept) {
        if (!(fn in used)) {
            printf "  exception no longer needed: %s\n", fn
        }
    }
    printf "complexity: %d over the limits (%d kept, %d to fix)\n", n, nkept, n - nkept
    exit (strict == 1 && n > nkept) ? 1 : 0
}'
status=$?
if [[ ${IVM_COMPLEXITY_STRICT:-0} == 1 ]]; then
    exit "$status"
fi
exit 0
