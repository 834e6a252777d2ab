"""netpoll-ng harness library: the one place for the test network's
addresses and ports, the kernel command-line builders, the QEMU command
line, the network namespace, splat patterns, the NIC list, and the
guest, netconsole, echo and iperf3 helpers.

Python 3 standard library only.  matrix/run.py, matrix/cell.py and every
program under tests/ import it; matrix/ktap.py holds the KTAP output.
"""

import json
import os
import re
import select
import shlex
import signal
import socket
import struct
import subprocess
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(TOP, "build")
PYTHON = "/usr/bin/python3"

HOST_IP = "192.0.2.1"
GUEST_IP = "192.0.2.2"
# a VLAN on the guest's eth0 (tests/kgdboe.py device_gone): its id, device
# and addresses (198.51.100.0/24, TEST-NET-2)
VLAN_ID = 100
VLAN_DEV = "eth0.%d" % VLAN_ID
VLAN_GUEST_IP = "198.51.100.2"
VLAN_HOST_IP = "198.51.100.1"
VLAN_OTHER_IP = "198.51.100.9"  # a host of the VLAN that is not the peer
# the address a client is given on a bridge or bond (refused: no traffic)
STACKED_GUEST_IP = "203.0.113.2"
HOST_IP6 = "fd00:2::1"          # tap0's IPv6 address (IPv6 tests only)
GUEST_IP6 = "fd00:2::2"
OTHER_IP6 = "fd00:2::77"        # a host of the subnet that is not the peer
VLAN_GUEST_IP6 = "fd00:64::2"   # the VLAN's IPv6 subnet (fd00:64::/64)
VLAN_HOST_IP6 = "fd00:64::1"
VLAN_OTHER_IP6 = "fd00:64::77"


def ip6_up(dev, addr):
    """Guest shell: addr/64 on dev, without duplicate address detection."""
    return ("echo 0 > /proc/sys/net/ipv6/conf/%s/accept_dad && "
            "ip -6 addr add %s/64 dev %s" % (dev, addr, dev))


GUEST_IP6_UP = ip6_up("eth0", GUEST_IP6)
HOST_MAC = "02:00:c0:00:02:01"
GUEST_MAC = "52:54:00:12:34:56"
NC_PORT = 6666          # host port netconsole sends to
NC_SRC_PORT = 6665      # guest source port
ECHO_PORT = 6600        # guest port of the netpoll_echo test client
ECHO_HOST_PORT = 7000   # host port the echo measurements send from
TAP = "tap0"
KGDBOE_PORT = 6443      # kgdboe's default local port (the gdb target)
OTHER_MAC = "02:00:c0:00:02:99"  # a LAN host that is not the peer (spoofing)

# The forged-datagram floods of the attack steps (tests/kgdboe_lossy.py,
# tests/netsysrq.py), sent at about 5000/s.  Every datagram that reaches
# netpoll must be counted exactly.  How many reach it is checked against
# FLOOD_MIN_ARRIVED, a named tolerance: an emulated NIC drops what it
# cannot take in (i82559er let 9998 of 10000 through in the matrix of
# 2026-12-07; the other eight models 10000), and the check is that the
# flood was not lost before the kernel.
FLOOD = 10000
FLOOD_MIN_ARRIVED = FLOOD * 99 // 100
BRIDGE = os.path.join(BUILD, "kgdboe-bridge")  # make bridge
NETSYSRQ_PORT = 6667    # netsysrq's default local port
NETSYSRQ = os.path.join(BUILD, "netsysrq")  # make bridge: the host tool
NICS_FILE = os.path.join(TOP, "matrix", "nics")
SERIES_FILE = os.path.join(TOP, "series")


# --------------------------------------------------------------------------
# Kernel command-line builders (the seed's syntax:
# [src-port]@[src-ip]/[dev],[tgt-port]@<tgt-ip>/[tgt-mac])

def netpoll_target(port, tgt_port=None, dev="eth0", local=GUEST_IP,
                   remote=HOST_IP):
    """One netpoll option string for the test network."""
    return "%s@%s/%s,%s@%s/%s" % (port if port is not None else "",
                                  local, dev,
                                  tgt_port if tgt_port is not None else "",
                                  remote, HOST_MAC)


def netconsole_arg(nc_port=NC_PORT):
    return "netconsole=" + netpoll_target(NC_SRC_PORT, nc_port)


def kgdboe_arg(port=KGDBOE_PORT):
    return "kgdboe=" + kgdboe_config(port)


def kgdboe_config(port=KGDBOE_PORT, dev="eth0"):
    return netpoll_target(port, dev=dev)


def netsysrq_config():
    return netpoll_target(NETSYSRQ_PORT)


def netsysrq_arg():
    return "netsysrq=" + netsysrq_config()


def echo_config(ipv6=False, vlan=False):
    """The echo client's option string: on eth0 or on the VLAN device,
    over IPv4 or IPv6."""
    if ipv6 and vlan:
        return netpoll_target(ECHO_PORT, dev=VLAN_DEV, local=VLAN_GUEST_IP6,
                              remote=VLAN_HOST_IP6)
    if ipv6:
        return netpoll_target(ECHO_PORT, local=GUEST_IP6, remote=HOST_IP6)
    if vlan:
        return netpoll_target(ECHO_PORT, dev=VLAN_DEV, local=VLAN_GUEST_IP,
                              remote=VLAN_HOST_IP)
    return netpoll_target(ECHO_PORT)


def echo_arg(ipv6=False):
    return "netpoll_echo=" + echo_config(ipv6)


def guest_append(extra="", nc_port=NC_PORT, serial_console=True):
    """The guest kernel's command line: console, static IP, netconsole.
    Without serial_console, printk writes to netconsole alone (the serial
    log then has nothing of the kernel's)."""
    return " ".join([
        "console=ttyS0,115200" if serial_console else "",
        "ip=%s::%s:255.255.255.0:npng:eth0:off" % (GUEST_IP, HOST_IP),
        netconsole_arg(nc_port), "printk.devkmsg=on", "panic=-1",
        extra]).strip()


# --------------------------------------------------------------------------
# The series and the NIC list

def read_series(path=SERIES_FILE):
    """The patch files named in `series`, in order."""
    try:
        with open(path) as f:
            return [l.strip() for l in f
                    if l.strip() and not l.startswith("#")]
    except OSError:
        return []


class Nic:
    """One line of matrix/nics: QEMU model, expected driver, whether the
    tests require it, and the iperf3 options for host->guest load."""

    def __init__(self, model, driver, required, iperf_rx_opts):
        self.model = model
        self.driver = driver
        self.required = required
        self.iperf_rx_opts = iperf_rx_opts

    def __repr__(self):
        return "Nic(%s)" % self.model


def parse_nics(text):
    nics = []
    for line in text.splitlines():
        cols = line.split("#", 1)[0].split()
        if not cols:
            continue
        if len(cols) < 3 or cols[2] not in ("required", "extra"):
            raise ValueError("matrix/nics: bad line %r" % line.strip())
        opts = [] if len(cols) < 4 or cols[3] == "-" else \
            cols[3].split(",")
        if len(cols) > 4:
            raise ValueError("matrix/nics: bad line %r" % line.strip())
        nics.append(Nic(cols[0], cols[1], cols[2] == "required", opts))
    return nics


def read_nics(path=NICS_FILE):
    with open(path) as f:
        return parse_nics(f.read())


def nic(model):
    for n in read_nics():
        if n.model == model:
            return n
    raise KeyError("%s is not in matrix/nics" % model)


# --------------------------------------------------------------------------
# Kernel reports in a serial log.  A splat is found by its first line; a
# report with a call trace is fingerprinted by the first functions of the
# trace (as netdev's CI does), so the same crash is recognised across runs.

SPLAT = re.compile(r"(BUG: .*|WARNING: .*|Oops: .*|Kernel panic.*|"
                   r"general protection fault.*|"
                   r"sleeping function called from invalid context.*|"
                   r"possible circular locking.*|"
                   r"inconsistent lock state.*|"
                   r"possible recursive locking.*|"
                   r"INFO: .*(?:lock|hung|stall).*)")
TRACE_FN = re.compile(r"^\s*(?:\[[^\]]*\]\s*)*(?:\? )?([A-Za-z_][\w.]*)\+0x")
STRIP_TIME = re.compile(r"^\[\s*[\d.]+\]\s*")
# frames of the reporting machinery, not of the bug: left out of a
# fingerprint (as syzkaller and netdev's CI do)
TRACE_SKIP = re.compile(r"^(dump_stack(_lvl)?|show_stack|print_\w+|"
                        r"lock_acquire|lock_release|mark_lock\w*|"
                        r"valid_state|__warn|warn_slowpath\w*|report_bug|"
                        r"handle_bug|exc_invalid_op|panic|"
                        r"_raw_(spin|read|write)_\w+|do_raw_spin_\w+)$")


def find_splats(text, fingerprint_depth=5):
    """Every kernel report in a serial log, in order: dicts with the
    report's first line ("what") and "fingerprint", the first functions
    of the call trace that follows it (reliable frames only)."""
    out = []
    cur = None
    in_trace = False
    for raw in text.splitlines():
        line = STRIP_TIME.sub("", raw)
        m = SPLAT.search(line)
        if m and not in_trace:
            cur = {"what": one_line(m.group(1)), "trace": []}
            out.append(cur)
            continue
        if "Call Trace:" in line:
            in_trace = cur is not None
            continue
        if in_trace:
            f = TRACE_FN.match(line)
            if f and "? " not in line.split(f.group(1))[0][-2:]:
                if not TRACE_SKIP.match(f.group(1)):
                    cur["trace"].append(f.group(1))
            elif not f and not line.strip().startswith("?") and \
                    not line.strip().startswith("<"):
                in_trace = False
    for s in out:
        s["fingerprint"] = "/".join(s.pop("trace")[:fingerprint_depth])
    return out


def first_splat(path):
    """The first report in a serial log file, as one line, or None."""
    try:
        with open(path, errors="replace") as f:
            splats = find_splats(f.read())
    except OSError:
        return None
    if not splats:
        return None
    s = splats[0]
    return s["what"] + (" [%s]" % s["fingerprint"] if s["fingerprint"]
                        else "")


class HarnessError(Exception):
    """A step failed; str() is the one-line reason for the report."""

    def __init__(self, status, detail):
        super().__init__(detail)
        self.status = status
        self.detail = detail


def log(msg):
    print(msg, flush=True)


# --------------------------------------------------------------------------
# netconsole sequence analysis

BURST_RE = re.compile(rb"npng (\S+) (\d+)")


def analyze(seqs, sent):
    """Analyse the sequence numbers received for one burst of `sent`
    messages numbered 1..sent, in arrival order.

    Returns received (distinct, in range), missing, duplicates, reordered
    (arrivals lower than one already seen) and out_of_range."""
    seen = set()
    dup = reordered = out_of_range = 0
    high = 0
    for s in seqs:
        if s < 1 or s > sent:
            out_of_range += 1
            continue
        if s in seen:
            dup += 1
            continue
        seen.add(s)
        if s < high:
            reordered += 1
        high = max(high, s)
    missing = sent - len(seen)
    first_missing = None
    if missing:
        first_missing = min(set(range(1, sent + 1)) - seen)
    return {
        "sent": sent,
        "received": len(seen),
        "missing": missing,
        "duplicates": dup,
        "reordered": reordered,
        "out_of_range": out_of_range,
        "first_missing": first_missing,
    }


class NcReceiver:
    """Receives netconsole datagrams on HOST_IP:NC_PORT in a thread and
    keeps (arrival time, tag, seq) for every burst record."""

    def __init__(self, port=NC_PORT, logpath=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        # Host-side drops would be counted as netconsole losses: give the
        # socket a large buffer (root may exceed rmem_max).
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # RCVBUFFORCE
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
        self.sock.bind((HOST_IP, port))
        self.lock = threading.Lock()
        self.records = {}        # tag -> list of (time, seq)
        self.datagrams = 0
        self.other = 0
        self.text = []           # the datagrams that are no burst record
        self.last_rx = 0.0
        self.logf = open(logpath, "ab") if logpath else None
        self.stop_evt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop_evt.is_set():
            r, _, _ = select.select([self.sock], [], [], 0.2)
            if not r:
                continue
            data = self.sock.recv(65536)
            now = time.monotonic()
            with self.lock:
                self.datagrams += 1
                self.last_rx = now
                m = BURST_RE.search(data)
                if m:
                    tag = m.group(1).decode()
                    self.records.setdefault(tag, []).append(
                        (now, int(m.group(2))))
                else:
                    self.other += 1
                    self.text.append(data.decode(errors="replace"))
                    if self.logf:
                        self.logf.write(data)

    def wait_burst(self, tag, sent, quiet=2.0, limit=60.0):
        """Wait until all `sent` records of `tag` arrived, or nothing new
        came for `quiet` seconds, or `limit` seconds passed."""
        t0 = time.monotonic()
        while True:
            time.sleep(0.1)
            with self.lock:
                recs = list(self.records.get(tag, []))
                last = self.last_rx
            now = time.monotonic()
            if len({s for _, s in recs}) >= sent:
                break
            if now - max(last, t0) > quiet or now - t0 > limit:
                break
        return recs

    def wait_text(self, pattern, limit=10.0, since=0):
        """The first match of regex `pattern` in the datagrams that are
        no burst record, from the since-th on (wait up to `limit` s);
        None if none came."""
        deadline = time.monotonic() + limit
        while True:
            with self.lock:
                text = "".join(self.text[since:])
            m = re.search(pattern, text, re.M)
            if m or time.monotonic() > deadline:
                return m
            time.sleep(0.1)

    def mark(self):
        """A position for wait_text(since=): what arrives from now on."""
        with self.lock:
            return len(self.text)

    def close(self):
        self.stop_evt.set()
        self.thread.join(2)
        self.sock.close()
        if self.logf:
            self.logf.close()


def burst_metrics(recs, sent):
    """Figures for one burst from the receiver's (time, seq) records."""
    a = analyze([s for _, s in recs], sent)
    rate = None
    if len(recs) >= 2:
        span = recs[-1][0] - recs[0][0]
        if span > 0:
            rate = round((len(recs) - 1) / span, 1)
    a["msgs_per_s"] = rate
    a["first_rx"] = recs[0][0] if recs else None
    a["last_rx"] = recs[-1][0] if recs else None
    return a


# --------------------------------------------------------------------------
# The test network namespace

def sh(*argv, check=True):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if check and r.returncode:
        raise RuntimeError("%s: %s" % (" ".join(argv), r.stderr.strip()))
    return r.stdout


def host_ip6_up():
    """tap0 gets HOST_IP6/64 (in the namespace the caller is in)."""
    sh("ip", "-6", "addr", "replace", HOST_IP6 + "/64", "dev", TAP, "nodad")


def host_port(ip, port):
    """ip:port as gdb and the host tools take it: an IPv6 address in
    brackets."""
    return ("[%s]:%d" if ":" in ip else "%s:%d") % (ip, port)


class NetNS:
    """The namespace `name` with tap0 at HOST_IP/24, as a context manager:
    on exit (also on error or Ctrl-C) it runs the cleanups registered with
    defer(), kills every process left inside, and deletes tap and
    namespace.  Nothing of a run ever leaves it."""

    def __init__(self, name):
        self.name = name
        self.cleanups = []
        sh("ip", "netns", "add", name)
        try:
            for argv in (("ip", "link", "set", "lo", "up"),
                         ("ip", "tuntap", "add", "dev", TAP, "mode", "tap"),
                         ("ip", "link", "set", TAP, "address", HOST_MAC),
                         ("ip", "addr", "add", HOST_IP + "/24", "dev", TAP),
                         ("ip", "link", "set", TAP, "up")):
                sh(*self.argv(argv))
        except Exception:
            self.delete()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.delete()

    def argv(self, argv):
        """argv run inside the namespace."""
        return ["ip", "netns", "exec", self.name] + list(argv)

    def defer(self, fn, *args):
        self.cleanups.append((fn, args))

    def kill_all(self):
        for _ in range(10):
            pids = sh("ip", "netns", "pids", self.name, check=False).split()
            if not pids:
                return
            for p in pids:
                try:
                    os.kill(int(p), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            time.sleep(0.3)

    def delete(self):
        while self.cleanups:
            fn, args = self.cleanups.pop()
            try:
                fn(*args)
            except Exception as e:
                log("netns %s: cleanup %s failed: %s" % (self.name, fn, e))
        self.kill_all()
        sh(*self.argv(("ip", "link", "del", TAP)), check=False)
        sh("ip", "netns", "del", self.name, check=False)


def exit_on_sigterm():
    """Turn SIGTERM into SystemExit, so that context managers (NetNS, the
    guest) clean up when a run is killed, as they do on Ctrl-C."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)


def run_in_netns(ns_name, argv, stdout=None, timeout=None):
    """Run argv in a fresh namespace (NetNS), in a process group of its
    own that is killed after timeout seconds or on Ctrl-C.  Output goes
    to stdout (a file; None: ours).  Returns the exit code, negative when
    killed."""
    exit_on_sigterm()
    with NetNS(ns_name) as ns:
        proc = subprocess.Popen(ns.argv(argv), stdout=stdout,
                                stderr=subprocess.STDOUT,
                                start_new_session=True)
        ns.defer(kill_group, proc)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            return proc.wait()


def kill_group(proc, sig=signal.SIGKILL):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        proc.wait()


# --------------------------------------------------------------------------
# The guest

def qemu_argv(model, kernel, initrd, append, serial_log, ctl_path=None,
              cpus=1, mem=256, extra=(), monitor_path=None):
    """The one QEMU command line: i386 under TCG, the NIC model on the
    namespace's tap (model None: no network), ttyS0 to serial_log, with
    ctl_path ttyS1 to the guest agent's unix socket, and with
    monitor_path the QEMU monitor on a unix socket (cpu_snapshot())."""
    argv = ["qemu-system-i386", "-accel", "tcg", "-M", "pc", "-nodefaults",
            "-display", "none", "-no-reboot", "-m", str(mem),
            "-smp", str(cpus), "-kernel", kernel]
    if initrd:
        argv += ["-initrd", initrd]
    argv += ["-append", append]
    if model:
        argv += ["-netdev", "tap,id=n0,ifname=%s,script=no,downscript=no"
                 % TAP, "-device", "%s,netdev=n0,mac=%s" % (model,
                                                           GUEST_MAC)]
    else:
        argv += ["-nic", "none"]
    argv += ["-chardev", "file,id=con,path=%s" % serial_log,
             "-serial", "chardev:con"]
    if ctl_path:
        argv += ["-chardev", "socket,id=ctl,path=%s,server=on,wait=off"
                 % ctl_path, "-serial", "chardev:ctl"]
    monitor = ("unix:%s,server=on,wait=off" % monitor_path
               if monitor_path else "none")
    return argv + ["-monitor", monitor] + list(extra)


def write_cmd_file(serial_log, argv):
    """<log>.cmd: the command line, to rerun the guest by hand (inside a
    namespace with tap0, see README)."""
    base = serial_log[:-4] if serial_log.endswith(".log") else serial_log
    with open(base + ".cmd", "w") as f:
        f.write(" ".join(shlex.quote(a) for a in argv) + "\n")


class Guest:
    """One qemu-system-i386 guest with its serial log (ttyS0) and the
    control agent on ttyS1 (a unix socket chardev)."""

    def __init__(self, model, workdir, serial_log, kernel, initrd,
                 cpus=1, mem=256, extra_append="", nc_port=NC_PORT,
                 extra_qemu=(), serial_console=True):
        self.model = model
        self.serial_log = serial_log
        self.ctl_path = os.path.join(workdir, "ctl.sock")
        self.monitor_path = os.path.join(workdir, "monitor.sock")
        self.buf = b""
        self.seq = 0
        # tag -> (rc, output) of commands that ended while another was
        # awaited: started with start(), finished in any order
        self.ended = {}
        self.sock = None
        self.info = {}
        append = guest_append(extra_append, nc_port, serial_console)
        self.argv = qemu_argv(model, kernel, initrd, append, serial_log,
                              ctl_path=self.ctl_path, cpus=cpus, mem=mem,
                              extra=extra_qemu,
                              monitor_path=self.monitor_path)
        write_cmd_file(serial_log, self.argv)
        for path in (self.ctl_path, self.monitor_path):
            if os.path.exists(path):
                os.unlink(path)
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def _connect(self, deadline):
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out = self.proc.stdout.read().decode(errors="replace")
                raise HarnessError("fail", "qemu exited (%d): %s" % (
                    self.proc.returncode, one_line(out)))
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(self.ctl_path)
                self.sock = s
                return
            except OSError:
                s.close()
                time.sleep(0.05)
        raise HarnessError("fail", "qemu control socket never appeared")

    def _read_until(self, pattern, deadline):
        rx = re.compile(pattern)
        while True:
            m = rx.search(self.buf)
            if m:
                out = self.buf[:m.start()]
                self.buf = self.buf[m.end():]
                return out, m
            left = deadline - time.monotonic()
            if left <= 0:
                return None, None
            if self.proc.poll() is not None:
                raise HarnessError("fail", "qemu exited (%d) %s" % (
                    self.proc.returncode, self.serial_tail()))
            r, _, _ = select.select([self.sock], [], [], min(left, 0.5))
            if r:
                data = self.sock.recv(65536)
                if not data:
                    raise HarnessError("fail", "control channel closed")
                self.buf += data

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        self._connect(deadline)
        _, m = self._read_until(rb"@@READY ([^\r\n]*)\r?\n", deadline)
        if not m:
            raise HarnessError("boot-timeout", "no ready marker after %ds; "
                               "serial: %s" % (timeout, self.serial_tail()))
        parts = m.group(1).decode(errors="replace").split()
        self.info = {"release": parts[0] if parts else "?",
                     "driver": parts[1] if len(parts) > 1 else "none",
                     "cpus": int(parts[2]) if len(parts) > 2 else 0}
        return self.info

    def start(self, cmd):
        """Send a shell command to the guest without waiting; returns the
        tag to give to finish()."""
        self.seq += 1
        tag = "c%d" % self.seq
        self.sock.sendall(("%s %s\n" % (tag, cmd)).encode())
        return tag

    def run(self, cmd, timeout=60, check=True):
        """Run a shell command in the guest; returns (rc, output)."""
        return self.finish(self.start(cmd), cmd, timeout, check)

    def finish(self, tag, cmd, timeout=60, check=True):
        """Wait for the answer to a command sent with start()."""
        deadline = time.monotonic() + timeout
        while tag not in self.ended:
            out, m = self._read_until(rb"@@END (c\d+) (\d+)\r?\n",
                                      deadline)
            if not m:
                raise HarnessError("guest-timeout", "guest command %r gave "
                                   "no answer in %ds" % (cmd, timeout))
            self.ended[m.group(1).decode()] = (
                int(m.group(2)), out.decode(errors="replace"))
        rc, text = self.ended.pop(tag)
        if check and rc:
            raise HarnessError("fail", "guest command %r failed (%d): %s" % (
                cmd, rc, one_line(text)))
        return rc, text

    def monitor(self, commands, seconds=3.0):
        """The QEMU monitor's output for commands (one per line)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(seconds)
            s.connect(self.monitor_path)
            s.sendall("".join(c + "\n" for c in commands).encode())
            out, deadline = b"", time.monotonic() + seconds
            while time.monotonic() < deadline:
                r, _, _ = select.select([s], [], [], 0.3)
                if not r:
                    if out:
                        break
                    continue
                data = s.recv(65536)
                if not data:
                    break
                out += data
            return out.decode(errors="replace")
        finally:
            s.close()

    def serial_tail(self, n=1):
        try:
            with open(self.serial_log, "rb") as f:
                lines = [l for l in f.read().decode(errors="replace")
                         .splitlines() if l.strip()]
        except OSError:
            return "(no serial log)"
        return " | ".join(lines[-n:]) if lines else "(serial log empty)"

    def stop(self):
        if self.sock:
            self.sock.close()
            self.sock = None
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(5)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        for path in (self.ctl_path, self.monitor_path):
            if os.path.exists(path):
                os.unlink(path)


STACK_WORDS = 1024
# text addresses kept of them: deep enough to reach, under a debugger stop
# (kgdb, gdbstub, netpoll, the driver), the code that was interrupted
STACK_FRAMES = 80


def cpu_snapshot(guest, vmlinux):
    """Where each vCPU of a guest that stopped answering is: its EIP and
    the kernel text addresses among the top STACK_WORDS stack words (a
    crude backtrace), resolved with addr2line.  Read through the QEMU
    monitor, so it works whatever state the guest kernel is in."""
    regs = guest.monitor(["info registers -a"])
    lines = []
    for n, block in enumerate(re.split(r"CPU#\d+", regs)[1:]):
        eip = re.search(r"EIP=([0-9a-f]{8})", block)
        esp = re.search(r"ESP=([0-9a-f]{8})", block)
        if not eip or not esp:
            continue
        dump = guest.monitor(["cpu %d" % n, "x /%dwx 0x%s" % (
            STACK_WORDS, esp.group(1))])
        words = re.findall(r"0x(c[0-9a-f]{7})", " ".join(
            l.split(":", 1)[1] for l in dump.splitlines()
            if re.match(r"[0-9a-f]{8}: ", l)))
        lines.append("cpu%d: EIP=%s %s | stack: %s" % (
            n, eip.group(1), " ".join(symbolize(vmlinux, [eip.group(1)])),
            " < ".join(symbolize(vmlinux, words)[:STACK_FRAMES])))
    return lines or ["no CPU registers from the monitor: " + one_line(regs)]


def symbolize(vmlinux, addrs):
    """addr2line's function names for kernel addresses (hex strings)."""
    if not addrs:
        return []
    try:
        r = subprocess.run(["addr2line", "-f", "-s", "-e", vmlinux] +
                           ["0x" + a for a in addrs], capture_output=True,
                           text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return ["(addr2line: %s)" % e]
    out = r.stdout.splitlines()
    return ["%s(%s)" % (out[2 * i], out[2 * i + 1]) if 2 * i + 1 < len(out)
            else a for i, a in enumerate(addrs)
            if 2 * i < len(out) and out[2 * i] != "??"]


def one_line(text, limit=200):
    text = " ".join(text.split())
    return text[:limit] + ("..." if len(text) > limit else "")


# --------------------------------------------------------------------------
# iperf3 on the host side of the tap

IPERF_LINE = re.compile(
    r"\[\s*\d+\]\s+([\d.]+)-([\d.]+)\s+sec\s+[\d.]+\s+\S?Bytes\s+"
    r"([\d.]+)\s+(\S?)bits/sec")
UNITS = {"": 1e-6, "K": 1e-3, "M": 1.0, "G": 1e3}


def parse_iperf_line(line):
    """One line of iperf3's client output: (kind, start, end, Mbit/s) with
    kind "interval" (a 1 s report), "sender" or "receiver" (the summary
    lines), or None for any other line."""
    m = IPERF_LINE.search(line)
    if not m:
        return None
    start, end = float(m.group(1)), float(m.group(2))
    mbps = float(m.group(3)) * UNITS.get(m.group(4), 1.0)
    for kind in ("sender", "receiver"):
        if kind in line:
            return (kind, start, end, mbps)
    if end - start > 1.5:
        return None
    return ("interval", start, end, mbps)


class Iperf:
    """iperf3 client against the guest's server.  reverse=True loads
    guest->host (the guest transmits), False loads host->guest.

    Interval lines are read as they arrive (--forceflush) and stamped
    with the host's clock, so that a window (a burst) can be cut out."""

    def __init__(self, reverse, seconds, port=5201, extra=()):
        argv = ["iperf3", "-c", GUEST_IP, "-p", str(port), "-t",
                str(seconds), "-i", "1", "--forceflush", "-f", "m",
                "--connect-timeout", "3000"]
        if reverse:
            argv.append("-R")
        argv.extend(extra)
        self.seconds = seconds
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.intervals = []    # (arrival time, start, end, mbps)
        self.summary = None
        self.timed_out = None
        self.text = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            self.text.append(line)
            rec = parse_iperf_line(line)
            if rec and rec[0] == "interval":
                self.intervals.append((time.monotonic(),) + rec[1:])
            elif rec and (rec[0] == "receiver" or self.summary is None):
                self.summary = rec[3]

    def wait(self, timeout=None):
        """Wait for the run to end; returns True when iperf3 exited 0."""
        limit = timeout if timeout is not None else self.seconds + 15
        try:
            rc = self.proc.wait(limit)
        except subprocess.TimeoutExpired:
            self.kill()
            self.timed_out = limit
            return False
        self.thread.join(2)
        return rc == 0

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(5)
        self.thread.join(2)

    def mbps_between(self, t0, t1):
        """Mean of the interval rates that ended inside [t0, t1 + 1s]."""
        vals = [r for t, _, _, r in self.intervals if t0 <= t <= t1 + 1.0]
        if not vals:
            return None
        return round(sum(vals) / len(vals), 1)

    def error(self):
        lines = [l for l in self.text if "error" in l.lower()]
        if lines:
            return one_line(lines[-1])
        last = self.text[-1] if self.text else "no output"
        if self.timed_out:
            return "no result after %ds (last line: %s)" % (
                self.timed_out, one_line(last, 100))
        return "exit %s (last line: %s)" % (self.proc.returncode,
                                            one_line(last, 100))


def ping(count=3, timeout=1):
    r = subprocess.run(["ping", "-n", "-q", "-c", str(count), "-W",
                        str(timeout), "-i", "0.2", GUEST_IP],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return r.returncode == 0


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------
# netpoll statistics (debugfs, "key value" lines) and the echo client

def parse_kv(text):
    """The "key value" lines of a netpoll debugfs file as a dict; numbers
    become ints, send_ns_hist a list of ints."""
    d = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        vals = []
        for v in parts[1:]:
            try:
                vals.append(int(v))
            except ValueError:
                vals.append(v)
        if parts[0] == "send_ns_hist":
            d[parts[0]] = vals
        elif len(vals) == 1:
            d[parts[0]] = vals[0]
        else:
            d[parts[0]] = " ".join(str(v) for v in vals)
    return d


def read_stats(guest, prefix):
    """The statistics of the netpoll client whose debugfs folder starts
    with `prefix` (for example "netconsole-"), or None if there is none."""
    rc, out = guest.run("cat /sys/kernel/debug/netpoll/%s*/stats" % prefix,
                        timeout=30, check=False)
    if rc:
        return None
    return parse_kv(out)


def hist_delta(after, before):
    a = after.get("send_ns_hist") or []
    b = (before or {}).get("send_ns_hist") or [0] * len(a)
    return [x - y for x, y in zip(a, b)]


def hist_percentile_us(hist, q):
    """Upper bound, in microseconds, of the log2 bucket holding the q-th
    quantile of a send time histogram (bucket i: [2^i, 2^(i+1)) ns)."""
    total = sum(hist)
    if not total:
        return None
    want = q * total
    seen = 0
    for i, n in enumerate(hist):
        seen += n
        if seen >= want:
            return round((2 ** (i + 1)) / 1000.0, 3)
    return None


def quantile(sorted_vals, q):
    """Nearest-rank quantile of an already sorted list."""
    if not sorted_vals:
        return None
    i = min(len(sorted_vals) - 1,
            max(0, int(round(q * len(sorted_vals))) - 1))
    return sorted_vals[i]


class Echo:
    """Round trips to the guest's netpoll_echo client, one datagram at a
    time, from HOST_IP:ECHO_HOST_PORT."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((HOST_IP, ECHO_HOST_PORT))
        self.n = 0

    def rtts(self, count, timeout=0.5, until=None):
        """Send up to `count` datagrams, each after the previous one was
        answered or timed out, stopping early at monotonic time `until`.
        Returns (sorted RTTs in us, lost, sent); a reply that comes after
        its timeout is not lost but counted in self.late."""
        out = []
        lost = set()
        sent = 0
        self.late = 0

        def take(data, want):
            if data == want:
                return True
            m = re.match(rb"npng-echo (\d+)$", data)
            if m and int(m.group(1)) in lost:
                lost.discard(int(m.group(1)))
                self.late += 1
            return False

        for _ in range(count):
            if until is not None and time.monotonic() >= until:
                break
            self.n += 1
            want = b"npng-echo %d" % self.n
            t = time.monotonic()
            self.sock.sendto(want, (GUEST_IP, ECHO_PORT))
            sent += 1
            deadline = t + timeout
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    lost.add(self.n)
                    break
                r, _, _ = select.select([self.sock], [], [], left)
                if r and take(self.sock.recv(2048), want):
                    out.append((time.monotonic() - t) * 1e6)
                    break
        # late replies to the last ones
        end = time.monotonic() + (timeout if lost else 0)
        while lost and time.monotonic() < end:
            r, _, _ = select.select([self.sock], [], [],
                                    max(0, end - time.monotonic()))
            if r:
                take(self.sock.recv(2048), None)
        out.sort()
        self.lost_seqs = sorted(lost)
        return out, len(lost), sent

    def close(self):
        self.sock.close()


def flush_neigh():
    subprocess.run(["ip", "neigh", "flush", "dev", TAP],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def neigh_state(ip=GUEST_IP):
    """The host's neighbour entry for ip on the tap: (state, lladdr)."""
    out = subprocess.run(["ip", "neigh", "show", ip, "dev", TAP],
                         capture_output=True, text=True).stdout.split()
    lladdr = out[out.index("lladdr") + 1] if "lladdr" in out else None
    return (out[-1] if out else "NONE"), lladdr


# --------------------------------------------------------------------------
# KUnit results, parsed by the tree's own tools/testing/kunit/kunit.py

KUNIT_PY = os.path.join(BUILD, "linux", "tools", "testing", "kunit",
                        "kunit.py")


def kunit_cases(log_path, kunit_py=KUNIT_PY):
    """Every KUnit test case in a serial log, as (suite, case, status)
    with status PASS, FAIL, SKIP or ERROR, read by `kunit.py parse
    --json`.  Raises HarnessError when kunit.py finds no results."""
    if not os.path.exists(kunit_py):
        raise HarnessError("fail", "%s missing (make tree)" % kunit_py)
    jpath = log_path + ".kunit.json"
    r = subprocess.run([PYTHON, kunit_py, "parse", "--json=" + jpath,
                        log_path], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    try:
        with open(jpath) as f:
            top = json.load(f)
    except (OSError, ValueError):
        raise HarnessError("fail", "kunit.py parse gave no JSON (exit %d): "
                           "%s" % (r.returncode, one_line(r.stdout[-300:])))
    out = []

    def walk(group, suite):
        for c in group.get("test_cases", []):
            out.append((suite, c["name"], c["status"]))
        for g in group.get("sub_groups", []):
            walk(g, g["name"])

    walk(top, "")
    return out


# ------------------------------------------------------------ raw frames

def inet_checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xffff) + (total >> 16)
    return ~total & 0xffff


ETH_P_8021Q = 0x8100


def eth_header(dst_mac, src_mac, ethertype, vlan=None):
    """An Ethernet header, with an 802.1Q tag for VLAN `vlan`."""
    head = bytes.fromhex(dst_mac.replace(":", "")) + \
        bytes.fromhex(src_mac.replace(":", ""))
    if vlan is not None:
        head += struct.pack("!HH", ETH_P_8021Q, vlan)
    return head + struct.pack("!H", ethertype)


def udp_frame(payload, src_mac=HOST_MAC, src_ip=HOST_IP, sport=40000,
              dst_mac=GUEST_MAC, dst_ip=GUEST_IP, dport=KGDBOE_PORT,
              vlan=None):
    """An Ethernet frame holding one IPv4 UDP datagram, checksums right:
    what a host on the LAN can put on the wire with any addresses (with
    vlan, tagged for that VLAN)."""
    src, dst = socket.inet_aton(src_ip), socket.inet_aton(dst_ip)
    ulen = 8 + len(payload)
    pseudo = src + dst + struct.pack("!BBH", 0, 17, ulen)
    udp = struct.pack("!HHHH", sport, dport, ulen, 0) + payload
    csum = inet_checksum(pseudo + udp) or 0xffff
    udp = udp[:6] + struct.pack("!H", csum) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, 0, 0, 64, 17, 0,
                     src, dst)
    ip = ip[:10] + struct.pack("!H", inet_checksum(ip)) + ip[12:]
    return eth_header(dst_mac, src_mac, 0x0800, vlan) + ip + udp


ETH_P_ARP = 0x0806


def arp_frame(op, sender_mac, sender_ip, target_ip, target_mac=None,
              dst_mac="ff:ff:ff:ff:ff:ff", vlan=None):
    """An Ethernet frame holding an IPv4 ARP request (op 1) or reply
    (op 2) (with vlan, tagged for that VLAN)."""
    def mac(m):
        return bytes.fromhex((m or "00:00:00:00:00:00").replace(":", ""))
    return eth_header(dst_mac, sender_mac, ETH_P_ARP, vlan) + \
        struct.pack("!HHBBH", 1, 0x0800, 6, 4, op) + mac(sender_mac) + \
        socket.inet_aton(sender_ip) + mac(target_mac) + \
        socket.inet_aton(target_ip)


def parse_arp_frame(frame):
    """(op, sender MAC, sender IP, target MAC, target IP) of an Ethernet
    ARP frame, or None."""
    if len(frame) < 42 or struct.unpack("!H", frame[12:14])[0] != ETH_P_ARP:
        return None
    op = struct.unpack("!H", frame[20:22])[0]
    return (op, frame[22:28].hex(":"), socket.inet_ntoa(frame[28:32]),
            frame[32:38].hex(":"), socket.inet_ntoa(frame[38:42]))


ETH_P_IPV6 = 0x86dd
ICMPV6_NS, ICMPV6_NA = 135, 136


def solicited_node_mac(ip6):
    """The Ethernet address of ip6's solicited-node multicast group."""
    return "33:33:ff:" + socket.inet_pton(socket.AF_INET6, ip6)[13:].hex(":")


def ipv6_frame(nexthdr, payload, src_mac, src_ip, dst_mac, dst_ip,
               hop_limit=64, upper_csum_at=None, vlan=None):
    """An Ethernet frame holding one IPv6 packet; with upper_csum_at, the
    upper-layer checksum at that offset of payload is computed over the
    IPv6 pseudo-header (with vlan, tagged for that VLAN)."""
    src = socket.inet_pton(socket.AF_INET6, src_ip)
    dst = socket.inet_pton(socket.AF_INET6, dst_ip)
    if upper_csum_at is not None:
        pseudo = src + dst + struct.pack("!I3xB", len(payload), nexthdr)
        csum = inet_checksum(pseudo + payload) or 0xffff
        payload = payload[:upper_csum_at] + struct.pack("!H", csum) + \
            payload[upper_csum_at + 2:]
    ip6 = struct.pack("!IHBB", 6 << 28, len(payload), nexthdr, hop_limit)
    return eth_header(dst_mac, src_mac, ETH_P_IPV6, vlan) + ip6 + src + \
        dst + payload


def udp6_frame(payload, src_mac=HOST_MAC, src_ip=HOST_IP6, sport=40000,
               dst_mac=GUEST_MAC, dst_ip=GUEST_IP6, dport=ECHO_PORT,
               vlan=None):
    """An Ethernet frame holding one IPv6 UDP datagram, checksum right."""
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    return ipv6_frame(17, udp, src_mac, src_ip, dst_mac, dst_ip,
                      upper_csum_at=6, vlan=vlan)


def parse_udp6_frame(frame):
    """(src ip, sport, dst ip, dport, payload) of an untagged IPv6 UDP
    frame without extension headers, or None."""
    if len(frame) < 14 + 40 + 8 or frame[12:14] != b"\x86\xdd" or \
            frame[20] != 17:
        return None
    sport, dport, ulen = struct.unpack_from("!HHH", frame, 54)
    return (socket.inet_ntop(socket.AF_INET6, frame[22:38]), sport,
            socket.inet_ntop(socket.AF_INET6, frame[38:54]), dport,
            frame[62:54 + ulen])


def ns_frame(sender_mac, sender_ip, target_ip, vlan=None):
    """An IPv6 neighbour solicitation for target_ip, to its solicited-node
    group, with the sender's link-layer address option (with vlan,
    tagged)."""
    group = socket.inet_pton(socket.AF_INET6, "ff02::1:ff00:0")[:13] + \
        socket.inet_pton(socket.AF_INET6, target_ip)[13:]
    icmp = struct.pack("!BBHI", ICMPV6_NS, 0, 0, 0) + \
        socket.inet_pton(socket.AF_INET6, target_ip) + \
        struct.pack("!BB", 1, 1) + bytes.fromhex(sender_mac.replace(":", ""))
    return ipv6_frame(58, icmp, sender_mac, sender_ip,
                      solicited_node_mac(target_ip),
                      socket.inet_ntop(socket.AF_INET6, group),
                      hop_limit=255, upper_csum_at=2, vlan=vlan)


def parse_na_frame(frame):
    """(destination MAC, target address, target link-layer address) of a
    neighbour advertisement frame, or None."""
    if len(frame) < 14 + 40 + 24 or frame[12:14] != b"\x86\xdd" or \
            frame[20] != 58 or frame[54] != ICMPV6_NA:
        return None
    target = socket.inet_ntop(socket.AF_INET6, frame[62:78])
    tlla = frame[80:86].hex(":") if len(frame) >= 86 and \
        frame[78] == 2 else None
    return frame[0:6].hex(":"), target, tlla


# <linux/if_packet.h>
SOL_PACKET = 263
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 0x10


class TaggedSniffer:
    """An AF_PACKET socket on tap0 that sees the guest's frames with
    their VLAN: the host kernel takes an 802.1Q tag off before packet
    sockets see the frame, and gives it in PACKET_AUXDATA."""

    def __init__(self, ifname=TAP):
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                                  socket.htons(0x0003))
        self.sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        self.sock.bind((ifname, 0))
        self.sock.settimeout(0.2)

    def recv(self):
        """(vlan or None, frame without its tag), or None on a timeout."""
        try:
            frame, anc, _, addr = self.sock.recvmsg(65536, 64)
        except socket.timeout:
            return None
        if addr[2] == socket.PACKET_OUTGOING:
            return (None, b"")
        vlan = None
        for level, kind, data in anc:
            if level == SOL_PACKET and kind == PACKET_AUXDATA:
                status, _, _, _, _, tci = struct.unpack_from("=IIIHHH", data)
                if status & TP_STATUS_VLAN_VALID:
                    vlan = tci & 0xfff
        return vlan, frame

    def close(self):
        self.sock.close()


def parse_udp_frame(frame):
    """(src ip, sport, dst ip, dport, payload) of an untagged IPv4 UDP
    frame, or None."""
    if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return None
    ihl = (frame[14] & 15) * 4
    sport, dport, ulen = struct.unpack_from("!HHH", frame, 14 + ihl)
    return (socket.inet_ntoa(frame[26:30]), sport,
            socket.inet_ntoa(frame[30:34]), dport,
            frame[14 + ihl + 8:14 + ihl + ulen])


class RawSender:
    """An AF_PACKET socket on tap0: frames straight to the guest's NIC,
    inside our namespace only."""

    def __init__(self, ifname=TAP):
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        self.sock.bind((ifname, 0))

    def send(self, frame):
        self.sock.send(frame)

    def close(self):
        self.sock.close()
