#!/bin/sh
# Install test: install the build tree into a temporary prefix, build the
# examples against the installed ivm.h and libivm only (pkg-config), run them
# under the installed ivmrun, and build a CMake project that uses
# find_package(IVM) and ivm::ivm.
#
# usage: check_install.sh BUILD_DIR SOURCE_DIR [CC] [CMAKE]
set -eu

build=$1
src=$2
cc=${3:-cc}
cmake=${4:-cmake}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ivm-install.XXXXXX")
prefix=$tmp/prefix
work=$tmp/work
sockdir=$tmp/sock
mkdir -m 700 "$sockdir"
mkdir "$work"

fail() {
    echo "check_install: FAIL: $*" >&2
    exit 1
}

# Processes started by our runs carry IVM_SOCKET_DIR=$sockdir.
leftovers() {
    for e in /proc/[0-9]*/environ; do
        if { tr '\0' '\n' < "$e"; } 2>/dev/null | grep -qx "IVM_SOCKET_DIR=$sockdir"; then
            pid=${e#/proc/}
            echo "${pid%/environ}"
        fi
    done
}

cleanup() {
    for pid in $(leftovers); do
        kill -9 "$pid" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

echo "== cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" > "$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; fail "cmake --install failed"; }

[ -f "$prefix/include/ivm.h" ] || fail "ivm.h not installed in $prefix/include"
[ -x "$prefix/bin/ivmrun" ] || fail "ivmrun not installed in $prefix/bin"
[ -x "$prefix/bin/ivmd" ] || fail "ivmd not installed in $prefix/bin"
pc=$(find "$prefix" -name ivm.pc | head -n 1)
[ -n "$pc" ] || fail "ivm.pc not installed"
cfg=$(find "$prefix" -name IVMConfig.cmake | head -n 1)
[ -n "$cfg" ] || fail "IVMConfig.cmake not installed"
[ -n "$(find "$prefix" -name 'IVMConfigVersion.cmake')" ] || fail "IVMConfigVersion.cmake not installed"
lib=$(find "$prefix" -name 'libivm.so*' | head -n 1)
[ -n "$lib" ] || fail "libivm.so not installed"
libdir=$(dirname "$lib")
pcdir=$(dirname "$pc")

flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs ivm) ||
    fail "pkg-config cannot read the installed ivm.pc"
echo "pkg-config --cflags --libs ivm: $flags"
case "$flags" in
    *"$src"*|*"$build"*) fail "ivm.pc points into the source or build tree: $flags" ;;
esac
case "$flags" in
    *"$prefix"*) ;;
    *) fail "ivm.pc does not point into the install prefix $prefix: $flags" ;;
esac

# Run a program under the installed ivmrun with a private socket directory
# (and IVM's libdir in LD_LIBRARY_PATH unless RPATH_ONLY=1).
run() {
    name=$1
    shift
    ldpath=$libdir
    [ "${RPATH_ONLY:-0}" = 1 ] && ldpath=
    env -u IVM_SOCKET -u IVM_DAEMON -u XDG_RUNTIME_DIR -u IVM_AUTOSTART \
        IVM_SOCKET_DIR="$sockdir" LD_LIBRARY_PATH="$ldpath" \
        timeout 120 "$prefix/bin/ivmrun" "$@" > "$work/$name.out" 2>&1 || {
        rc=$?
        cat "$work/$name.out"
        fail "$name under the installed ivmrun exited $rc"
    }
    cat "$work/$name.out"
}

for ex in vecadd dslb; do
    [ -f "$src/examples/$ex.c" ] || fail "examples/$ex.c missing"
    # A copy outside the source tree: only the installed header can be found.
    cp "$src/examples/$ex.c" "$work/$ex.c"
    echo "== $cc $ex.c against the installed ivm.h"
    # shellcheck disable=SC2086
    "$cc" -std=c11 -Wall -o "$work/$ex" "$work/$ex.c" $flags ||
        fail "$ex.c does not build against the installed ivm.h and libivm"
    if ldd "$work/$ex" | grep -q "$build"; then
        fail "$ex links a library of the build tree"
    fi
    run "$ex" "$work/$ex"
    grep -q "^$ex: OK" "$work/$ex.out" || fail "$ex did not print '$ex: OK'"
done

echo "== find_package(IVM) project"
mkdir "$work/proj"
cat > "$work/proj/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(ivm_consumer LANGUAGES C)
find_package(IVM 0.1 REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE ivm::ivm)
EOF
cat > "$work/proj/main.c" <<'EOF'
#include <stdio.h>
#include <ivm.h>

int main(void)
{
    int id = -1;

    if (ivmEnter() != IVM_SUCCESS || ivmGetMyId(&id) != IVM_SUCCESS || ivmExit() != IVM_SUCCESS)
        return 1;
    printf("consumer: OK pe %d, IVM %d\n", id, IVM_VERSION);
    return id == 0 ? 0 : 1;
}
EOF
"$cmake" -S "$work/proj" -B "$work/proj/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$cc" > "$work/proj.log" 2>&1 ||
    { cat "$work/proj.log"; fail "configuring a find_package(IVM) project failed"; }
"$cmake" --build "$work/proj/build" --verbose > "$work/proj-build.log" 2>&1 ||
    { cat "$work/proj-build.log"; fail "building a find_package(IVM) project failed"; }
if grep -q -- "-I$src" "$work/proj-build.log"; then
    fail "the find_package(IVM) project includes from the source tree"
fi
run consumer "$work/proj/build/consumer"
grep -q "^consumer: OK pe 0" "$work/consumer.out" || fail "consumer did not print its OK line"

echo "== --version of every installed program"
for p in ivmrun ivmd ivm-gpud ivm-info ivm-ctl ivm-boot ivm-boot-srun; do
    [ -x "$prefix/bin/$p" ] || continue
    out=$(LD_LIBRARY_PATH="$libdir" "$prefix/bin/$p" --version 2>&1) ||
        fail "$p --version exited $?: $out"
    echo "$out" | head -n 1
    echo "$out" | grep -q "^$p (IVM) [0-9]*\.[0-9]*\.[0-9]*$" ||
        fail "$p --version does not start with '$p (IVM) VERSION': $out"
    echo "$out" | grep -q "^revision: *[0-9a-z]" || fail "$p --version names no revision: $out"
    echo "$out" | grep -q "^built with: " || fail "$p --version names no features: $out"
done

echo "== ivmcc and ivmc++ from the install"
for w in ivmcc ivmc++; do
    [ -x "$prefix/bin/$w" ] || fail "$w not installed in $prefix/bin"
    cflags=$("$prefix/bin/$w" --showme:compile) || fail "$w --showme:compile failed"
    lflags=$("$prefix/bin/$w" --showme:link) || fail "$w --showme:link failed"
    case "$cflags" in *"-I$prefix/include"*) ;; *) fail "$w --showme:compile: $cflags" ;; esac
    case "$lflags" in
        *"-Wl,-rpath,$libdir"*"-livm"*) ;;
        *) fail "$w --showme:link has no rpath to $libdir and -livm: $lflags" ;;
    esac
    case "$("$prefix/bin/$w" --showme -c x.c)" in
        *-livm*) fail "$w -c would link" ;;
    esac
done
cp "$src/examples/vecadd.c" "$work/wrapped.c"
"$prefix/bin/ivmcc" -std=c11 -Wall -o "$work/wrapped" "$work/wrapped.c" ||
    fail "ivmcc cannot build examples/vecadd.c"
RPATH_ONLY=1 run wrapped "$work/wrapped"
grep -q "^vecadd: OK" "$work/wrapped.out" || fail "the ivmcc-built vecadd did not print OK"
cat > "$work/cxx.cc" <<'EOF'
#include <cstdio>
#include <ivm.h>

int main()
{
    char text[IVM_MAX_LIBRARY_VERSION_STRING];
    int id = -1;

    if (ivmEnter() != IVM_SUCCESS || ivmGetMyId(&id) != IVM_SUCCESS ||
        ivmGetLibraryVersion(text, sizeof(text)) != IVM_SUCCESS || ivmExit() != IVM_SUCCESS)
        return 1;
    std::printf("cxx: OK pe %d, %s\n", id, text);
    return 0;
}
EOF
if command -v c++ > /dev/null 2>&1; then
    "$prefix/bin/ivmc++" -Wall -o "$work/cxx" "$work/cxx.cc" || fail "ivmc++ cannot build a C++ program"
    RPATH_ONLY=1 run cxx "$work/cxx"
    grep -q "^cxx: OK pe 0, IVM " "$work/cxx.out" || fail "the ivmc++-built program did not print OK"
fi

echo "== man pages from the install"
mandir=$prefix/share/man
for page in man1/ivmrun.1 man1/ivm-info.1 man1/ivmcc.1 man1/ivmc++.1 man8/ivmd.8 \
            man8/ivm-gpud.8 man3/ivm.3; do
    [ -f "$mandir/$page" ] || fail "man page $page not installed in $mandir"
done
# Every call declared in ivm.h has a page (or a .so link to its group's page).
calls=$(sed -n 's/^IVM_API [^(]*[ *]\(ivm[A-Za-z]*\)(.*/\1/p' "$prefix/include/ivm.h")
[ -n "$calls" ] || fail "no IVM_API declarations found in the installed ivm.h"
for c in $calls; do
    [ -f "$mandir/man3/$c.3" ] || fail "no man page for $c (man3/$c.3)"
    MANPATH=$mandir man -w "$c" > /dev/null 2>&1 || fail "man -w $c does not find its page"
done
echo "$(echo "$calls" | wc -l) API calls have pages"
# Every page renders, .so links resolved, without a warning.
command -v man > /dev/null 2>&1 || fail "man (man-db) is not installed: run scripts/install-deps.sh"
for page in "$mandir"/man*/*; do
    rel=${page#"$mandir"/}
    warn=$(cd "$mandir" && MANWIDTH=80 man --warnings=w -E UTF-8 -l "$rel" 2>&1 > /dev/null)
    [ -z "$warn" ] || fail "man -l $rel warns: $warn"
    (cd "$mandir" && MANWIDTH=80 man -E UTF-8 -l "$rel" 2>/dev/null) | grep -q "^NAME" ||
        fail "man -l $rel renders no NAME section"
done
# The programs' OPTIONS sections come from their option tables: every option of
# --help is on the page.
for prog in ivmrun:man1/ivmrun.1 ivmd:man8/ivmd.8 ivm-gpud:man8/ivm-gpud.8; do
    p=${prog%%:*}
    rendered=$(cd "$mandir" && MANWIDTH=200 man -E ascii -l "${prog#*:}" 2>/dev/null)
    for opt in $(LD_LIBRARY_PATH="$libdir" "$prefix/bin/$p" --help | sed -n 's/^  \(--[a-z0-9-]*\).*/\1/p'); do
        echo "$rendered" | grep -q -- "$opt" || fail "$p --help has $opt, its man page not"
    done
done

tries=0
left=$(leftovers)
while [ -n "$left" ] && [ $tries -lt 50 ]; do
    sleep 0.1
    tries=$((tries + 1))
    left=$(leftovers)
done
[ -z "$left" ] || fail "processes left after the runs: $left"
echo "check_install: OK"
