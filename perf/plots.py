"""The plots of make perf (python3-matplotlib, from Debian's archive):
the throughput ratio per NIC with its range, the netconsole cost per
message as a CDF per kernel, the netconsole rate against record size, and
the debuggers on log scales."""

import os

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    plt = None

KERNEL_COLOURS = {"mainline": "tab:blue", "series": "tab:orange"}


def ratio_range(row):
    """The ratio of the medians, and the lowest and highest ratio the two
    ranges allow."""
    m, s = row["mainline"], row["series"]
    if not m or not s or not m["min"]:
        return None
    return (s["median"] / m["median"], s["min"] / m["max"],
            s["max"] / m["min"])


def throughput_ratio(doc, path):
    fig, ax = plt.subplots(figsize=(7, 3.5))
    nics = list(doc["summary"])
    for j, (key, label) in enumerate((("iperf_tx_mbps", "guest->host"),
                                      ("iperf_rx_mbps", "host->guest"))):
        for i, nic in enumerate(nics):
            r = ratio_range(doc["summary"][nic][key])
            if r is None:
                continue
            x = i + (j - 0.5) * 0.3
            ax.errorbar([x], [r[0]], yerr=[[r[0] - r[1]], [r[2] - r[0]]],
                        fmt="o", color=("tab:green", "tab:purple")[j],
                        capsize=4, label=label if i == 0 else None)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.axhline(0.98, color="grey", lw=0.8, ls="--")
    ax.set_xticks(range(len(nics)), nics)
    ax.set_ylabel("series / mainline iperf3")
    ax.set_title("Throughput with the clients idle (median, min-max range)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def pooled_write_times(samples, kernel):
    """Every burst's 101 write-time percentiles pooled: each burst has the
    same number of records, so the pooled points are a CDF of every
    record's write time."""
    vals = []
    for s in samples:
        if s["kernel"] == kernel:
            vals += s["metrics"].get("nc_idle_write_us_pct") or []
    return sorted(vals)


def netconsole_cdf(doc, path):
    fig, ax = plt.subplots(figsize=(6, 3.5))
    drawn = False
    for kernel, colour in KERNEL_COLOURS.items():
        vals = pooled_write_times(doc["samples"], kernel)
        if vals:
            ys = [(i + 1) / len(vals) for i in range(len(vals))]
            ax.step(vals, ys, where="post", color=colour, label=kernel)
            drawn = True
    if not drawn:
        plt.close(fig)
        return False
    ax.set_xscale("log")
    ax.set_xlabel("guest time of one netconsole message's write(2), us")
    ax.set_ylabel("fraction of messages")
    ax.set_title("Netconsole cost per message, every NIC and repetition")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def netconsole_sizes(doc, path):
    rows = doc.get("sizes_summary") or {}
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for kind, style in (("plain", "-"), ("ext", "--")):
        prefixes = [p for p in rows if p.startswith(kind)]
        sizes = [int(p[len(kind):]) for p in prefixes]
        for col in next(iter(rows.values())):
            kernel, cpus = col.split("-")
            meds = [(rows[p][col]["msgs_per_s"] or {}).get("median")
                    for p in prefixes]
            ax.plot(sizes, meds, style, marker="o" if cpus == "1cpu"
                    else "s", color=KERNEL_COLOURS[kernel],
                    alpha=1.0 if cpus == "1cpu" else 0.6,
                    label="%s, %s, %s" % (kernel, cpus.replace("cpu", " CPU"),
                                          "extended" if kind == "ext"
                                          else "plain"))
    ax.set_xlabel("record size, bytes")
    ax.set_ylabel("records/s delivered (median)")
    ax.set_title("Netconsole rate against record size (%s)" %
                 doc.get("sizes_nic"))
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def debuggers(doc, path):
    dbg = doc.get("debuggers") or {}
    names = [t for t in dbg if dbg[t]]
    if not names:
        return False
    colours = {"kgdboe": "tab:orange", "kgdboe-auth": "tab:red",
               "kgdboc": "tab:blue", "gdbstub": "tab:grey"}
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for ax, (key, label) in zip(axes, (("read_ms_median",
                                        "p jiffies round trip, ms"),
                                       ("dump_kib_s",
                                        "64 KiB read, KiB/s"))):
        vals = [dbg[t].get(key) or 0 for t in names]
        ax.bar(names, vals, color=[colours.get(t, "black") for t in names])
        ax.set_yscale("log")
        ax.set_title(label)
        ax.tick_params(axis="x", labelsize=7)
    ax = axes[2]
    for t in names:
        rates = dbg[t].get("read_kib_s") or {}
        sizes = sorted(int(n) for n in rates)
        if sizes:
            ax.plot(sizes, [rates[str(n)] for n in sizes], marker="o",
                    color=colours.get(t, "black"), label=t)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes per read")
    ax.set_title("read rate against read size, KiB/s")
    ax.legend(fontsize=7)
    fig.suptitle("Debuggers on the same guest (log scales)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def write_all(doc, folder):
    """Every plot into folder; the names of the files written."""
    if plt is None:
        return []
    made = []
    for name, fn in (("throughput-ratio.png", throughput_ratio),
                     ("netconsole-cost-cdf.png", netconsole_cdf),
                     ("netconsole-sizes.png", netconsole_sizes),
                     ("debuggers.png", debuggers)):
        if fn(doc, os.path.join(folder, name)) is not False:
            made.append(name)
    return made
