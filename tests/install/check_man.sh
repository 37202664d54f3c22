#!/bin/sh
# Man page test, run by check_install.sh on the installed pages: the pages a
# user looks for exist, every call of ivm.h and every status has its page,
# each page has the sections its kind needs, man renders every page (.so
# links resolved) without a warning, and each program's page names every
# option its --help prints.
#
# usage: check_man.sh MANDIR IVM_H BINDIR LIBDIR
set -eu

mandir=$1
header=$2
bindir=$3
libdir=$4

fail() {
    echo "check_man: FAIL: $*" >&2
    exit 1
}

for tool in man groff; do
    command -v $tool > /dev/null 2>&1 ||
        fail "$tool is not installed (man-db, groff-base): run scripts/install-deps.sh"
done

pages="man1/ivmrun.1 man1/ivm-info.1 man1/ivm-ctl.1 man1/ivmcc.1 man1/ivmc++.1 man8/ivmd.8
       man8/ivm-gpud.8 man3/ivm.3"
[ -x "$bindir/ivm-perftest" ] && pages="$pages man1/ivm-perftest.1"
for page in $pages; do
    [ -f "$mandir/$page" ] || fail "man page $page not installed in $mandir"
done

# Nothing but pages (a build directory's Makefile was installed here once).
stray=$(cd "$mandir" && find . -type f | grep -v '^\./man\([1-8]\)/[^/]*\.\1$' || true)
[ -z "$stray" ] || fail "not man pages, in $mandir: $stray"

# Every call declared in ivm.h has a page (or a .so link to its group's page).
calls=$(sed -n 's/^IVM_API [^(]*[ *]\(ivm[A-Za-z]*\)(.*/\1/p' "$header")
[ -n "$calls" ] || fail "no IVM_API declarations found in $header"
for c in $calls; do
    [ -f "$mandir/man3/$c.3" ] ||
        fail "no man page for $c: add its name to its group's NAME line in man/, or man/$c.3"
    MANPATH=$mandir man -w "$c" > /dev/null 2>&1 || fail "man -w $c does not find its page"
done
echo "check_man: $(echo "$calls" | wc -l) API calls have pages"

render() { # PAGE (relative to mandir), WIDTH
    (cd "$mandir" && MANWIDTH=$2 man -E ascii -l "$1" 2> /dev/null)
}

# Every status of the table is explained in ivm(3).
ivm3=$(render man3/ivm.3 200)
for s in $(sed -n 's/^ *X(\(IVM_[A-Z_]*\),.*/\1/p' "$header"); do
    echo "$ivm3" | grep -q "^ *$s\$" || fail "ivm(3) ERRORS does not explain $s"
done

# The sections a page of its kind must have ("A|B": one of them).
needs() { # PAGE
    case $1 in
        man3/ivm.3) echo "NAME SYNOPSIS DESCRIPTION ERRORS ENVIRONMENT EXAMPLES SEE_ALSO" ;;
        man3/*) echo "NAME SYNOPSIS DESCRIPTION RETURN_VALUE|ERRORS EXAMPLES SEE_ALSO" ;;
        *) echo "NAME SYNOPSIS DESCRIPTION OPTIONS ENVIRONMENT EXAMPLES SEE_ALSO" ;;
    esac
}

version=$(sed -n 's/^#define IVM_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' "$header" |
          paste -sd. -)
npages=0
for page in "$mandir"/man*/*; do
    rel=${page#"$mandir"/}
    warn=$(cd "$mandir" && MANWIDTH=80 man --warnings=w -E UTF-8 -l "$rel" 2>&1 > /dev/null)
    [ -z "$warn" ] || fail "man -l $rel warns: $warn"
    render "$rel" 80 | grep -q "^NAME" || fail "man -l $rel renders no NAME section"
    head -n 1 "$page" | grep -q '^\.so ' && continue
    npages=$((npages + 1))
    # groff itself, with every warning on: man's pass misses some (fonts).
    warn=$(groff -man -ww -z "$page" 2>&1)
    [ -z "$warn" ] || fail "groff -man -ww $rel warns: $warn"
    head -n 1 "$page" | grep -q "\"IVM $version\"" ||
        fail "$rel: its .TH line does not name IVM $version"
    have=$(sed -n 's/^\.SH *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$page" | tr ' ' _)
    for need in $(needs "$rel"); do
        found=0
        for alt in $(echo "$need" | tr '|' ' '); do
            echo "$have" | grep -qx "$alt" && found=1
        done
        [ $found = 1 ] || fail "$rel has no $(echo "$need" | tr _ ' ') section"
    done
done
echo "check_man: $npages pages have their sections and render without a warning"

# A program's page names every option its --help prints (for ivmrun, ivmd
# and ivm-gpud the OPTIONS section is generated from the same table).
for prog in ivmrun:man1/ivmrun.1 ivmd:man8/ivmd.8 ivm-gpud:man8/ivm-gpud.8 \
            ivm-info:man1/ivm-info.1 ivm-ctl:man1/ivm-ctl.1 ivm-perftest:man1/ivm-perftest.1; do
    p=${prog%%:*}
    [ -x "$bindir/$p" ] || continue
    rendered=$(render "${prog#*:}" 200)
    help=$(LD_LIBRARY_PATH="$libdir" "$bindir/$p" --help) || fail "$p --help exited $?"
    for opt in $(echo "$help" | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
        echo "$rendered" | grep -q -- "$opt" || fail "$p --help has $opt, its man page not"
    done
done
# ivmcc's own options are the --showme forms (--help goes to the compiler);
# it is in bin/ once installed only.
if [ -x "$bindir/ivmcc" ]; then
    rendered=$(render man1/ivmcc.1 200)
    help=$("$bindir/ivmcc" --showme:help) || fail "ivmcc --showme:help exited $?"
    for opt in $(echo "$help" | grep -o -- '--showme[:a-z]*' | sort -u); do
        echo "$rendered" | grep -q -- "$opt" || fail "ivmcc --showme:help has $opt, ivmcc(1) not"
    done
fi
echo "check_man: OK"
