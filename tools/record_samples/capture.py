"""Run tcpdump (or dumpcap for pcapng) around a scenario and check nothing was dropped."""
from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

SETTLE_AFTER_TRAFFIC = 2.5  # seconds between the end of traffic and SIGTERM


class CaptureError(RuntimeError):
    pass


class Capture:
    """tool="tcpdump": interfaces=[(iface, None)], one filter.
    tool="dumpcap": interfaces=[(iface, filter), ...] -> pcapng with one IDB per interface."""

    def __init__(self, path: Path, interfaces=(("lo", None),), bpf="tcp port 5672",
                 tool="tcpdump", nano=False, buffer_kib=None):
        self.path, self.interfaces, self.bpf, self.tool, self.nano = Path(path), list(interfaces), bpf, tool, nano
        self.buffer_kib = buffer_kib  # tcpdump -B (its default 2 MiB can overflow on a burst of 64 KiB segments)
        self.proc = None
        self.stderr_path = Path("/tmp") / f"amqpcap-{self.path.name}.stderr"

    def cmd(self) -> list[str]:
        if self.tool == "tcpdump":
            (iface, _), = self.interfaces
            c = ["tcpdump", "-i", iface, "-w", str(self.path)]
            if self.nano:
                c += ["--time-stamp-precision=nano"]
            if self.buffer_kib:
                c += ["-B", str(self.buffer_kib)]
            return c + [self.bpf]
        c = ["dumpcap", "-q"]
        for iface, filt in self.interfaces:
            c += ["-i", iface, "-f", filt or self.bpf]
        return c + ["-w", str(self.path)]

    def start(self) -> "Capture":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            self.path.unlink()
        self._err = open(self.stderr_path, "w+")
        self.proc = subprocess.Popen(self.cmd(), stdout=subprocess.DEVNULL, stderr=self._err)
        ready = "listening on" if self.tool == "tcpdump" else "Capturing on"
        deadline = time.time() + 15
        while ready not in self.stderr_path.read_text():
            if self.proc.poll() is not None or time.time() > deadline:
                raise CaptureError(f"{self.tool} did not start: {self.stderr_path.read_text()}")
            time.sleep(0.05)
        time.sleep(0.5)  # let the capture settle (ring buffer armed)
        return self

    def stop(self) -> str:
        time.sleep(SETTLE_AFTER_TRAFFIC)
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        self._err.close()
        err = self.stderr_path.read_text()
        self.check_drops(err)
        return err

    def check_drops(self, err: str) -> None:
        if self.tool == "tcpdump":
            if "0 packets dropped by kernel" not in err.splitlines():
                raise CaptureError(f"tcpdump reported drops: {err}")
            m = re.search(r"(\d+) packets dropped by interface", err)
            if m and int(m.group(1)):
                raise CaptureError(f"tcpdump reported interface drops: {err}")
        else:
            drops = re.findall(r"received/dropped on interface '[^']*': (\d+)/(\d+)", err)
            if not drops or any(int(d) for _, d in drops):
                raise CaptureError(f"dumpcap reported drops: {err}")
