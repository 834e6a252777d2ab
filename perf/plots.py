"""The plots of make perf (python3-matplotlib, from Debian's archive):
the throughput ratio per NIC with its range, the netconsole cost per
message as a CDF per kernel, and the debuggers on a log scale."""

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


def netconsole_cdf(doc, path):
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for kernel, colour in KERNEL_COLOURS.items():
        vals = sorted(s["metrics"]["nc_idle_us_per_msg"]
                      for s in doc["samples"] if s["kernel"] == kernel and
                      s["metrics"].get("nc_idle_us_per_msg"))
        if vals:
            ys = [(i + 1) / len(vals) for i in range(len(vals))]
            ax.step(vals, ys, where="post", color=colour, label=kernel)
    ax.set_xlabel("guest time per netconsole message, us (one burst each)")
    ax.set_ylabel("fraction of bursts")
    ax.set_title("Netconsole cost per message, every NIC and repetition")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def debuggers(doc, path):
    dbg = doc.get("debuggers") or {}
    names = [t for t in dbg if dbg[t]]
    if not names:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.5))
    for ax, (key, label) in zip(axes, (("read_ms_median",
                                        "p jiffies round trip, ms"),
                                       ("dump_kib_s",
                                        "64 KiB read, KiB/s"))):
        vals = [dbg[t].get(key) or 0 for t in names]
        ax.bar(names, vals, color=["tab:orange", "tab:blue", "tab:grey"][
            :len(names)])
        ax.set_yscale("log")
        ax.set_title(label)
    fig.suptitle("Debuggers on the same guest (log scale)")
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
                     ("debuggers.png", debuggers)):
        if fn(doc, os.path.join(folder, name)) is not False:
            made.append(name)
    return made
