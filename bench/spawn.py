"""One command's wall time and peak memory, measured by a small launcher rather than by the benchmark.

    seconds, rss_mb, cpu_seconds, returncode = measured(command, env=None)

Why a launcher: a child's peak RSS (`ru_maxrss`) counts the memory of the process it was forked
from, up to its exec (Linux folds the old address space's high-water mark into it), and Python's
subprocess forks (or vforks) from the benchmark itself. A benchmark that has read a 150 MB capture
(counting its packets, synthesising it) then reports every command it starts as at least that big,
whatever the command used. The launcher is a fresh interpreter of a few MB that starts the command
with posix_spawn, waits for it, and reports its rusage; the time is taken inside the launcher, from
spawning to reaping, so neither tool is charged the launcher's own start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

_LAUNCHER = r"""
import json, os, sys, time
out = os.open(os.devnull, os.O_WRONLY)
actions = [(os.POSIX_SPAWN_DUP2, out, 1), (os.POSIX_SPAWN_DUP2, out, 2)]
start = time.perf_counter()
pid = os.posix_spawnp(sys.argv[1], sys.argv[1:], os.environ, file_actions=actions)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - start
print(json.dumps([seconds, usage.ru_maxrss // 1024, usage.ru_utime + usage.ru_stime,
                  os.waitstatus_to_exitcode(status)]))
"""


def measured(command: list[str], env: dict | None = None) -> tuple[float, int, float, int]:
    """(wall seconds, peak RSS in MB, CPU seconds, exit code) of `command`, its output discarded."""
    done = subprocess.run([sys.executable, "-S", "-c", _LAUNCHER, *command], capture_output=True, text=True,
                          env={**os.environ, **env} if env else None, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"the launcher failed for {command[0]}: {done.stderr.strip()[-500:]}")
    seconds, rss, cpu, code = json.loads(done.stdout.strip().splitlines()[-1])
    return seconds, int(rss), cpu, int(code)
