#!/usr/bin/env python3
"""Plots of a bench/run-scale.sh run: latency and bandwidth against size.

    bench/plot-scale.py OUT/scale.csv [IMG_DIR (docs/img)]

Writes IMG_DIR/scale-latency.png (time per blocking call, us) and
IMG_DIR/scale-bandwidth.png (MB/s, 10^6 B/s), log-log, one line per series:
IVM ivmSyncPut/ivmSyncGet (node1 -> node0), MPI_Put/MPI_Get + MPI_Win_flush,
raw loopback TCP put/get; points are the median over the rounds, bars the
min and max. The 8 B points come from the latency rows (TCP: one round trip),
the others from the bandwidth rows.

Draws with matplotlib where it is installed, else with gnuplot (as
bench/apps/plot.sh does); exits 1 saying so when neither is there.
"""
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile

# series name -> (key prefix of the latency row, its field, bandwidth tag, op)
SERIES = [
    ("IVM Put", "sync_remote_lat", "put_median_us", "sync_remote_bw", "put"),
    ("IVM Get", "sync_remote_lat", "get_median_us", "sync_remote_bw", "get"),
    ("MPI_Put+flush", "mpi_lat", "put_median_us", "mpi_bw", "put"),
    ("MPI_Get+flush", "mpi_lat", "get_median_us", "mpi_bw", "get"),
    ("TCP put", "tcp_lat", "rtt_median_us", "tcp_bw", "put"),
    ("TCP get", "tcp_lat", "rtt_median_us", "tcp_bw", "get"),
]


def load(path):
    rows = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            rows[r["key"]] = (float(r["median"]), float(r["min"]), float(r["max"]))
    return rows


def points(rows, lat_tag, lat_field, bw_tag, op):
    """(latency points, bandwidth points): lists of (bytes, median, min, max)."""
    lat, bw = [], []
    k = lat_tag + "." + lat_field
    if k in rows:
        lat.append((8,) + rows[k])
    pat = re.compile(re.escape(bw_tag) + r"\.bytes=(\d+)\." + op + "_(median_us|MBps)$")
    for key, v in rows.items():
        m = pat.match(key)
        if m:
            (lat if m.group(2) == "median_us" else bw).append((int(m.group(1)),) + v)
    return sorted(lat), sorted(bw)


def plot_matplotlib(series, img_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for which, ylabel, fname in ((0, "time per blocking call, us", "scale-latency.png"),
                                 (1, "bandwidth, MB/s", "scale-bandwidth.png")):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for name, pts in series:
            p = pts[which]
            if not p:
                continue
            x = [q[0] for q in p]
            y = [q[1] for q in p]
            err = [[q[1] - q[2] for q in p], [q[3] - q[1] for q in p]]
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=name,
                        linestyle="--" if name.startswith("TCP") else "-")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("bytes")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(img_dir, fname), dpi=110)
        plt.close(fig)


def plot_gnuplot(series, img_dir):
    tmp = tempfile.mkdtemp(prefix="plot-scale.")
    try:
        for which, ylabel, fname in ((0, "time per blocking call, us", "scale-latency.png"),
                                     (1, "bandwidth, MB/s", "scale-bandwidth.png")):
            plots = []
            for i, (name, pts) in enumerate(series):
                p = pts[which]
                if not p:
                    continue
                dat = os.path.join(tmp, "s%d_%d.dat" % (which, i))
                with open(dat, "w") as f:
                    for q in p:
                        f.write("%d %g %g %g\n" % q)
                dt = 2 if name.startswith("TCP") else 1
                plots.append("'%s' using 1:2:3:4 with yerrorlines lw 2 dt %d title '%s' noenhanced"
                             % (dat, dt, name))
            if not plots:
                continue
            script = "\n".join([
                "set terminal pngcairo size 900,560",
                "set output '%s'" % os.path.join(img_dir, fname),
                "set logscale x 2",
                "set logscale y 10",
                "set format x '2^{%L}'",
                "set xlabel 'bytes'",
                "set ylabel '%s'" % ylabel,
                "set grid",
                "set key left top" if which == 0 else "set key right bottom",
                "plot " + ", ".join(plots),
            ])
            subprocess.run(["gnuplot"], input=script.encode(), check=True)
    finally:
        shutil.rmtree(tmp)


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) >= 2 else 2
    rows = load(sys.argv[1])
    img_dir = sys.argv[2] if len(sys.argv) > 2 else "docs/img"
    os.makedirs(img_dir, exist_ok=True)
    series = [(s[0], points(rows, *s[1:])) for s in SERIES]
    try:
        import matplotlib  # noqa: F401
        plot_matplotlib(series, img_dir)
    except ImportError:
        if shutil.which("gnuplot") is None:
            print("plot-scale.py: neither matplotlib nor gnuplot is installed "
                  "(scripts/install-deps.sh plots)", file=sys.stderr)
            return 1
        plot_gnuplot(series, img_dir)
    print("plot-scale.py: %s/scale-latency.png and %s/scale-bandwidth.png" % (img_dir, img_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
