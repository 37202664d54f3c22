# bench/apps/summary.awk: runs.csv (bench/apps/run.sh) to summary.csv.
# Variables: speeds (the devices' speeds, space-separated, device order),
# names (their IVM share names, node<n>.cpu<k>, same order).
# Per app and setting: IVM's PEs (median), the median, min and max seconds
# of ivm, mpi and mpiw; the round-by-round ratios mpi/ivm (speedup over the
# equal split) and mpiw/ivm (against the speed-weighted split), median, min
# and max; the median load average; IVM's share of the work per device (each
# device's median over the rounds, normalised again); the largest relative gap |share - speed share| / speed share over the devices;
# the devices' measured speed shares (each device's median over the rounds of
# its speed share in the speed-weighted MPI runs, where every device computes
# for about the whole run as in a balanced one: work over the rank's seconds
# in its kernel, normalised again) and IVM's largest relative gap to those.
# The share and speed lists in summary.csv are space-separated.

function sort_n(a, n,    i, j, t) {
    for (i = 2; i <= n; i++)
        for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
            t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
        }
}
function med(a, n) { sort_n(a, n); return n == 0 ? "" : (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) }
function lo(a, n) { sort_n(a, n); return n == 0 ? "" : a[1] }
function hi(a, n) { sort_n(a, n); return n == 0 ? "" : a[n] }
function msh_out(x) { gsub(/,/, " ", x); return x == "" ? "-" : x }
function fmt(x, d) { return x == "" ? "-" : sprintf("%." d "f", x) }
# largest_gap(SHARES, WANT, N): the largest |got - want| / want over the
# devices nm[1..N], their wanted shares WANT[d]; SHARES "dev:x,dev:y,...".
function largest_gap(shares, want, n,    got, parts, kv, j, m, d, g, x, gap) {
    m = split(shares, parts, ",")
    for (j = 1; j <= m; j++) { split(parts[j], kv, ":"); got[kv[1]] = kv[2] }
    gap = 0
    for (d = 1; d <= n; d++) {
        g = (nm[d] in got) ? got[nm[d]] : 0
        x = (g - want[d]) / want[d]; if (x < 0) x = -x
        if (x > gap) gap = x
    }
    return gap
}

BEGIN {
    OFS = ","
    nd = split(speeds, spd, " ")
    split(names, nm, " ")
    for (i = 1; i <= nd; i++)
        total += spd[i]
    for (i = 1; i <= nd; i++)
        nominal[i] = spd[i] / total
}
NR == 1 { next }
{
    key = $1 "," $2
    if (!(key in seen)) { seen[key] = 1; keys[++nkeys] = key }
    sec[key, $4, $3] = $5
    if ($4 == "mpiw" && $10 != "-") {     # rank r's speed share: device r's
        n = split($10, parts, " ")
        for (j = 1; j <= n; j++) { split(parts[j], kv, ":"); mspd[key, j, $3] = kv[2] }
        nmspd[key, $3] = n
    }
    if ($4 == "ivm") {
        pes[key, $3] = $6
        sh = $11
        for (f = 12; f <= NF; f++) sh = sh "," $f   # the share list has commas
        share[key, $3] = sh
    }
    load[key, $3] = $7
    rounds[key, $3] = 1
    if ($3 > maxr) maxr = $3
}
END {
    print "app,setting,ivm_pes,ivm_s,ivm_min,ivm_max,mpi_s,mpi_min,mpi_max,mpiw_s,mpiw_min,mpiw_max,speedup,speedup_min,speedup_max,vs_weighted,vs_weighted_min,vs_weighted_max,load,share,share_gap,measured_speed,measured_gap"
    for (k = 1; k <= nkeys; k++) {
        key = keys[k]
        split("", I); split("", M); split("", W); split("", S); split("", R); split("", L); split("", P)
        ni = nm_ = nw = ns = nr = nl = np = 0
        for (r = 1; r <= maxr; r++) {
            if (!((key, r) in rounds)) continue
            L[++nl] = load[key, r]
            i = sec[key, "ivm", r]; m = sec[key, "mpi", r]; w = sec[key, "mpiw", r]
            if (i != "") { I[++ni] = i; P[++np] = pes[key, r] }
            if (m != "") M[++nm_] = m
            if (w != "") W[++nw] = w
            if (i != "" && m != "") S[++ns] = m / i
            if (i != "" && w != "") R[++nr] = w / i
        }
        # IVM's share per device: its median over the rounds (0 in a round
        # that gave the device nothing), normalised again.
        split("", dsh); split("", dvn); ndv = 0; nrs = 0; msh = ""; tot = 0
        for (r = 1; r <= maxr; r++) {
            if (!((key, r) in share)) continue
            nrs++
            x = share[key, r]; gsub(/"/, "", x)
            m = split(x, parts, ",")
            for (j = 1; j <= m; j++) {
                if (split(parts[j], kv, ":") != 2) continue
                if (!((kv[1], "seen") in dsh)) { dsh[kv[1], "seen"] = 1; dvn[++ndv] = kv[1] }
                dsh[kv[1], r] = kv[2]
            }
        }
        for (j = 1; j <= ndv; j++) {
            split("", V); nv = 0
            for (r = 1; r <= maxr; r++)
                if ((key, r) in share) V[++nv] = ((dvn[j], r) in dsh) ? dsh[dvn[j], r] : 0
            msv[j] = med(V, nv); tot += msv[j]
        }
        for (j = 1; j <= ndv && tot > 0; j++)
            msh = msh (j > 1 ? "," : "") sprintf("%s:%.4f", dvn[j], msv[j] / tot)
        gap = ""
        if (msh != "" && nd > 0)
            gap = largest_gap(msh, nominal, nd)
        # The measured speed shares: per device, the median over the rounds
        # whose weighted run measured every device.
        split("", meas); mlist = ""; mgap = ""; msum = 0
        for (d = 1; d <= nd; d++) {
            split("", V); nv = 0
            for (r = 1; r <= maxr; r++)
                if (nmspd[key, r] == nd) V[++nv] = mspd[key, d, r]
            if (nv == 0) { msum = 0; break }
            meas[d] = med(V, nv); msum += meas[d]
        }
        if (msum > 0) {
            for (d = 1; d <= nd; d++) {
                meas[d] /= msum
                mlist = mlist (d > 1 ? " " : "") sprintf("%s:%.4f", nm[d], meas[d])
            }
            if (msh != "")
                mgap = largest_gap(msh, meas, nd)
        }
        print key, med(P, np), fmt(med(I, ni), 3), fmt(lo(I, ni), 3), fmt(hi(I, ni), 3),
              fmt(med(M, nm_), 3), fmt(lo(M, nm_), 3), fmt(hi(M, nm_), 3),
              fmt(med(W, nw), 3), fmt(lo(W, nw), 3), fmt(hi(W, nw), 3),
              fmt(med(S, ns), 2), fmt(lo(S, ns), 2), fmt(hi(S, ns), 2),
              fmt(med(R, nr), 2), fmt(lo(R, nr), 2), fmt(hi(R, nr), 2),
              fmt(med(L, nl), 2), msh_out(msh), gap == "" ? "-" : sprintf("%.1f%%", 100 * gap),
              mlist == "" ? "-" : mlist, mgap == "" ? "-" : sprintf("%.1f%%", 100 * mgap)
    }
}
