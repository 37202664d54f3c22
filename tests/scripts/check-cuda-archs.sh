#!/bin/sh
# check-cuda-archs.sh CUOBJDUMP BINARY ARCHS: the apps' CUDA kernels in
# BINARY carry machine code for every real architecture of ARCHS (the
# CMAKE_CUDA_ARCHITECTURES list: "70-real;80-real;90") and PTX for every
# virtual one (an entry without -real, or with -virtual), as the fatbinary
# lists them: cuobjdump --list-elf/--list-ptx, or fatbin-archs.py beside this
# script where the toolkit has no cuobjdump. A GPU whose architecture is
# missing fails each launch with "no kernel image is available".
set -u
cuobjdump=$1 bin=$2 archs=$3
here=$(dirname "$0")
if [ -x "$cuobjdump" ]; then
    elf=$("$cuobjdump" --list-elf "$bin" 2>&1) || { echo "cuobjdump --list-elf $bin: $elf"; exit 1; }
    ptx=$("$cuobjdump" --list-ptx "$bin" 2>&1) || { echo "cuobjdump --list-ptx $bin: $ptx"; exit 1; }
else
    all=$(python3 "$here/fatbin-archs.py" "$bin" 2>&1) || { echo "fatbin-archs.py $bin: $all"; exit 1; }
    elf=$(echo "$all" | grep '^elf')
    ptx=$(echo "$all" | grep '^ptx')
fi
fail=0
for a in $(echo "$archs" | tr ';' ' '); do
    n=${a%%-*}
    case $a in
        *-virtual) want_elf=0 want_ptx=1 ;;
        *-real) want_elf=1 want_ptx=0 ;;
        all|all-major|native) echo "ARCHS $a: nothing fixed to check"; exit 0 ;;
        *) want_elf=1 want_ptx=1 ;;
    esac
    if [ $want_elf = 1 ] && ! echo "$elf" | grep -q "sm_${n}\b"; then
        echo "FAIL: no sm_$n machine code in $bin"; fail=1
    fi
    if [ $want_ptx = 1 ] && ! echo "$ptx" | grep -q "sm_${n}\b\|compute_${n}\b"; then
        echo "FAIL: no PTX for compute_$n in $bin"; fail=1
    fi
done
# One image only is the mistake this guards against (sm_90 alone: no A100).
if [ "$(echo "$elf" | grep -o 'sm_[0-9]*' | sort -u | wc -l)" -lt 2 ]; then
    echo "FAIL: $bin has machine code for one architecture only"; fail=1
fi
[ $fail = 0 ] && echo "ok: $bin has machine code for $(echo "$elf" | grep -o 'sm_[0-9]*' | sort -u | tr '\n' ' ')and PTX for $(echo "$ptx" | grep -o 'sm_[0-9]*' | sort -u | tr '\n' ' ')"
exit $fail
