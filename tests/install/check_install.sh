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

# The examples as installed (share/ivm/examples), built with their Makefile,
# which uses the installed ivmcc: the programs run without LD_LIBRARY_PATH.
exdir=$prefix/share/ivm/examples
[ -f "$exdir/Makefile.example" ] || fail "examples not installed in $exdir"
cp -r "$exdir" "$work/examples"
examples=$(cd "$work/examples" && ls ./*.c | sed 's|^\./||; s|\.c$||')
[ "$(echo "$examples" | wc -w)" -eq "$(ls "$src"/examples/*.c | wc -l)" ] ||
    fail "share/ivm/examples has not every examples/*.c"
echo "== make -f Makefile.example with the installed ivmcc"
PATH=$prefix/bin:$PATH make -C "$work/examples" -f Makefile.example > "$work/make.log" 2>&1 ||
    { cat "$work/make.log"; fail "the installed examples do not build with ivmcc"; }
grep -q "^ivmcc " "$work/make.log" || { cat "$work/make.log"; fail "make did not use ivmcc"; }
for ex in $examples; do
    if ldd "$work/examples/$ex" | grep -q "$build"; then
        fail "$ex links a library of the build tree"
    fi
    RPATH_ONLY=1 run "$ex" "$work/examples/$ex"
    grep -q "^$ex: OK" "$work/$ex.out" || fail "$ex did not print '$ex: OK'"
done

# The program of the README, built with the lines the README and the user
# guide give (ivmcc, pkg-config, the static archive), each run as documented.
echo "== README's hello.c, built as the README says"
sed -n '/^\/\* hello.c/,/^```$/p' "$src/README.md" | sed '$d' > "$work/hello.c"
grep -q "ivmEnter" "$work/hello.c" || fail "no hello.c found in README.md"
hello_ok() { # NAME (the root's line, tagged [node0,0] under --tag-output)
    grep -q "^\(\[node0,0\] \)\{0,1\}v\[999\] = 1998$" "$work/$1.out" ||
        fail "$1 did not print v[999] = 1998"
}
(cd "$work" && "$prefix/bin/ivmcc" -std=gnu11 -O2 -o hello hello.c) ||
    fail "README: ivmcc -std=gnu11 -O2 -o hello hello.c"
# Run as the README says where cores 0 and 1 are ours.
devices=""
case $(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status) in
    0-*|0,1*) devices="--cpu-devices 0,1" ;;
esac
# shellcheck disable=SC2086
RPATH_ONLY=1 run hello --tag-output $devices "$work/hello"
hello_ok hello
# shellcheck disable=SC2086
(cd "$work" && "$cc" -std=gnu11 -o hello-pc hello.c $flags) ||
    fail "user guide: cc -std=gnu11 -o app app.c \$(pkg-config --cflags --libs ivm)"
RPATH_ONLY=1 run hello-pc "$work/hello-pc"
hello_ok hello-pc
# A sanitizer build's archive needs its runtime linked in, as any such object.
san=$(sed -n 's/^IVM_SANITIZE:[A-Z]*=\(..*\)$/-fsanitize=\1/p' "$build/CMakeCache.txt" 2>/dev/null || true)
# shellcheck disable=SC2046,SC2086
(cd "$work" && "$cc" -std=c11 -o hello-static hello.c \
    $(PKG_CONFIG_PATH=$pcdir pkg-config --cflags ivm) "$libdir/libivm.a" -lpthread $san) ||
    fail "README: cc -std=c11 -o hello hello.c \$(pkg-config --cflags ivm) PREFIX/lib/libivm.a -lpthread"
if ldd "$work/hello-static" | grep -q libivm; then
    fail "hello-static links libivm.so"
fi
# libcrypto is loaded by a PE that opens an endpoint, not by every program
# that links libivm (3.4 ms per process start on the test VM).
for f in "$work/hello-static" "$libdir/libivm.so"; do
    if [ -e "$f" ] && ldd "$f" | grep -q libcrypto; then
        fail "$f depends on libcrypto: libivm is to load it on first use"
    fi
done
RPATH_ONLY=1 run hello-static "$work/hello-static"
hello_ok hello-static

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
for p in ivmrun ivmd ivm-gpud ivm-info ivm-ctl ivm-boot ivm-boot-srun ivm-perftest; do
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
    [ "$("$prefix/bin/$w" --showme:incdirs)" = "$prefix/include" ] ||
        fail "$w --showme:incdirs: $("$prefix/bin/$w" --showme:incdirs)"
    [ "$("$prefix/bin/$w" --showme:libdirs)" = "$libdir" ] ||
        fail "$w --showme:libdirs: $("$prefix/bin/$w" --showme:libdirs)"
    case " $("$prefix/bin/$w" --showme:libs) " in *" ivm "*) ;; *) fail "$w --showme:libs" ;; esac
    if "$prefix/bin/$w" --showme:nonsense > /dev/null 2>&1; then
        fail "$w --showme:nonsense did not fail"
    fi
    case "$("$prefix/bin/$w" --showme -c x.c)" in
        *-livm*) fail "$w -c would link" ;;
    esac
done
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
sh "$(dirname "$0")/check_man.sh" "$prefix/share/man" "$prefix/include/ivm.h" "$prefix/bin" \
    "$libdir" || fail "the installed man pages"

tries=0
left=$(leftovers)
while [ -n "$left" ] && [ $tries -lt 50 ]; do
    sleep 0.1
    tries=$((tries + 1))
    left=$(leftovers)
done
[ -z "$left" ] || fail "processes left after the runs: $left"
echo "check_install: OK"
