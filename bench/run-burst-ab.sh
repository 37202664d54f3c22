#!/usr/bin/env bash
# bench-dpc --burst, two builds alternating (docs/BENCHMARKS.md, "PE bursts").
#   bench/run-burst-ab.sh BEFORE_BUILD AFTER_BUILD
# Each round runs `ivmrun bench-dpc --burst SIZES --pool POOL -n RUNS` of the
# before build, then of the after build (each with its own ivmrun, ivmd and
# libivm), and keeps the output with the load average in OUT/<before|after>-K.txt;
# then it prints, per row, the median of the round medians and their min-max.
# Environment: ROUNDS (5), SIZES (1,16,64,256), POOL (64), RUNS (5),
# OUT (a new temporary directory).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BEFORE_BUILD AFTER_BUILD" >&2; exit 2; }
out=${OUT:-$(mktemp -d /tmp/ivm-burst-ab.XXXXXX)}
mkdir -p "$out"
for k in $(seq 1 "${ROUNDS:-5}"); do
  for t in before after; do
    b=$([ "$t" = before ] && echo "$1" || echo "$2")/bin
    { echo "load $(cat /proc/loadavg)"
      timeout 600 "$b/ivmrun" "$b/bench-dpc" --burst "${SIZES:-1,16,64,256}" \
          --pool "${POOL:-64}" -n "${RUNS:-5}" 2>&1
      echo "load-end $(cat /proc/loadavg)"; } > "$out/$t-$k.txt"
  done
done
echo "raw output in $out"
python3 - "$out" <<'PY'
import glob, re, statistics, sys
d = sys.argv[1]
for t in ("before", "after"):
    rows, loads, uds = {}, [], []
    for f in sorted(glob.glob(f"{d}/{t}-*.txt")):
        for l in open(f):
            m = re.match(r"RESULT dpc burst mode=(\w+) n=(\d+) pool=\d+ median_ms=([\d.]+)", l)
            if m:
                rows.setdefault((m[1], int(m[2])), []).append(float(m[3]))
            m = re.match(r"load ([\d.]+)", l)
            if m:
                loads.append(float(m[1]))
            m = re.match(r"RESULT dpc uds-rtt median_us=([\d.]+)", l)
            if m:
                uds.append(float(m[1]))
    if not rows:
        continue
    print(f"{t}: load {min(loads):.1f}-{max(loads):.1f}; UDS round trip "
          f"{statistics.median(uds):.2f} us ({min(uds):.2f}-{max(uds):.2f})")
    for (mode, n), v in sorted(rows.items()):
        med = statistics.median(v)
        print(f"  {mode:4} {n:4}  {med:9.3f} ms ({min(v):.3f}-{max(v):.3f})  "
              f"{med / n:.4f} ms/PE  rounds={len(v)}")
PY
