#!/usr/bin/env bash
# bench/apps/plot.sh OUT_DIR SCENARIO DESCRIPTION "OMLB DEVICE NAMES": the
# plots of a bench/apps/run.sh run from OUT_DIR/summary.csv, machine.txt and
# omlb.dat (gnuplot, PNG and SVG):
#   speedup   IVM's speedup over equal-split MPI, and its ratio to
#             speed-weighted MPI, against IVM's PEs (one line per app,
#             min/max error bars; the perfect split's speedup dashed)
#   share     IVM's share of the work per device (the last setting of each
#             app) beside the devices' share of the speed
#   omlb      HIMENO's OM-LB: PEs and units per device over the iterations
set -euo pipefail

if ! command -v gnuplot >/dev/null 2>&1; then
    echo "plot.sh: gnuplot is missing: run scripts/install-deps.sh plots (as root)" >&2
    exit 1
fi

out=$1 name=$2 desc=$3 omlb_names=${4:-}
sum=$out/summary.csv

# The devices' speeds (machine.txt: "devices: SPECS (speeds A B C); ...").
read -ra speeds <<<"$(sed -n 's/^devices: .*(speeds \([0-9 ]*\)).*/\1/p' "$out/machine.txt")"
total=0 min=0
for s in "${speeds[@]}"; do
    total=$((total + s))
    ((min == 0 || s < min)) && min=$s
done
perfect=$(awk -v t="$total" -v n="${#speeds[@]}" -v m="$min" 'BEGIN { printf "%.3f", n && m ? t / (n * m) : 1 }')

# speedup_<app>.dat: pes speedup min max vs_weighted min max
apps=$(tail -n +2 "$sum" | cut -d, -f1 | uniq)
plots_sp=() plots_w=()
for app in $apps; do
    awk -F, -v a="$app" '$1 == a && $13 != "-" { print $3, $13, $14, $15, $16, $17, $18 }' "$sum" |
        sort -n >"$out/speedup_$app.dat"
    [[ -s $out/speedup_$app.dat ]] || continue
    plots_sp+=("'$out/speedup_$app.dat' using 1:2:3:4 with yerrorlines lw 2 title '$app'")
    plots_w+=("'$out/speedup_$app.dat' using 1:5:6:7 with yerrorlines lw 2 title '$app'")
done

# share.dat: device, nominal speed share, measured speed share (the mean
# over the apps' last settings of summary.csv's measured_speed; 0 when not
# measured), then each app's share (its last setting).
{
    printf 'device nominal-speed measured-speed'
    for app in $apps; do printf ' %s' "$app"; done
    printf '\n'
    names=$(tail -n +2 "$sum" | cut -d, -f20 | tr ' ' '\n' | cut -d: -f1 | { grep -v '^-$' || true; } | sort -u)
    for dev in $names; do
        idx=$(( $(echo "$names" | grep -n "^$dev\$" | cut -d: -f1) - 1 ))
        sp=0
        ((idx < ${#speeds[@]})) && sp=${speeds[$idx]}
        printf '%s %s' "$dev" "$(awk -v s="$sp" -v t="$total" 'BEGIN { printf "%.4f", t ? s / t : 0 }')"
        for app in $apps; do
            awk -F, -v a="$app" '$1 == a { l = $22 } END { print l }' "$sum"
        done | tr ' ' '\n' | sed -n "s/^$dev:\(.*\)/\1/p" |
            awk '{ t += $1; n++ } END { printf " %.4f", n ? t / n : 0 }'
        for app in $apps; do
            line=$(awk -F, -v a="$app" '$1 == a { l = $20 } END { print l }' "$sum")
            v=$(tr ' ' '\n' <<<"$line" | sed -n "s/^$dev:\(.*\)/\1/p")
            printf ' %s' "${v:-0}"
        done
        printf '\n'
    done
} >"$out/share.dat"
napps=$(wc -w <<<"$apps")

for term in "pngcairo size 1000,720" "svg size 1000,720"; do
    ext=${term%% *}
    ext=${ext%cairo}
    if ((${#plots_sp[@]})); then
        gnuplot <<EOF
set terminal $term
set output '$out/speedup.$ext'
set multiplot layout 2,1 title "$name: $desc"
set title "IVM speedup over MPI's equal split (MPI s / IVM s; perfect split: $perfect)"
set xlabel 'PEs (IVM: child PEs spawned)'
set ylabel 'speedup'
set key outside right top
set grid
set yrange [0:*]
plot $(IFS=,; echo "${plots_sp[*]}"), 1 with lines dt 2 lc rgb 'gray' title 'MPI equal split', $perfect with lines dt 3 lc rgb 'black' title 'perfect split'
set title "IVM against MPI given every device's speed (MPI weighted s / IVM s)"
set ylabel 'ratio (> 1: IVM faster)'
plot $(IFS=,; echo "${plots_w[*]}"), 1 with lines dt 2 lc rgb 'gray' title 'MPI weighted split'
unset multiplot
EOF
    fi
    if [[ $(wc -l <"$out/share.dat") -gt 1 ]]; then
        gnuplot <<EOF
set terminal $term
set output '$out/share.$ext'
set title "$name: share of the work per device (IVM) against the device's share of the speed"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel 'share of the work'
set yrange [0:1]
set key outside right top
set grid ytics
plot '$out/share.dat' using 2:xtic(1) title columnheader(2), for [i=3:$((napps + 3))] '' using i title columnheader(i)
EOF
    fi
    if [[ -s $out/omlb.dat ]]; then
        n=$(wc -w <<<"$omlb_names")
        gnuplot <<EOF
set terminal $term
set output '$out/omlb.$ext'
set multiplot layout 2,1 title "$name: HIMENO with OM-LB"
set xlabel 'iteration'
set key outside right top
set grid
set yrange [0:*]
names = "$omlb_names"
set title 'PEs per device'
set ylabel 'PEs'
plot for [i=1:$n] '$out/omlb.dat' using 1:(column(i+1)) with steps lw 2 title word(names, i)
set title 'units (Z planes) per device'
set ylabel 'units'
plot for [i=1:$n] '$out/omlb.dat' using 1:(column(i+1+$n)) with steps lw 2 title word(names, i)
unset multiplot
EOF
    fi
done
ls "$out"/*.png "$out"/*.svg 2>/dev/null || true
