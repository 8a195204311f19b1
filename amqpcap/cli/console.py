"""What amqpcap shows on the console: its own logging on stderr (Spark's and the JVM's only with
--verbose), and progress while a job runs."""

from __future__ import annotations

import sys

NAME = "amqpcap"  # the logger of amqpcap's own lines
_wanted = ("INFO", False)  # (level, verbose) set up for, applied by _logger
_applied = False


def setup_logging(level: str = "INFO", verbose: bool = False) -> None:
    """amqpcap's lines on stderr from `level` on. Applied at once when logging is imported already
    (the commands that run Spark import it with their modules); otherwise when `log` first writes
    a line: `decode`, which logs only about captures that fail or are damaged, then starts without
    importing logging (~4 ms)."""
    global _wanted, _applied
    _wanted, _applied = (level, verbose), False
    if "logging" in sys.modules:
        _logger()


def _logger():
    """amqpcap's logger, set up as setup_logging asked."""
    global _applied
    import logging
    logger = logging.getLogger(NAME)
    if not _applied:
        _applied = True
        level, verbose = _wanted
        handler = _stderr_handler(logging)
        handler.setFormatter(logging.Formatter("amqpcap: %(message)s"))
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
        # py4j logs every gateway call at INFO/DEBUG; Spark's JVM logs go through log4j (quiet
        # unless --verbose, see amqpcap.job.session)
        logging.getLogger("py4j").setLevel(logging.DEBUG if verbose else logging.ERROR)
    return logger


def _stderr_handler(logging):
    class Stderr(logging.StreamHandler):
        """Writes to sys.stderr as it is at each record, not as it was at set-up: a harness that
        swaps stderr (pytest's capture, a notebook) then closes the old one loses no log lines."""

        @property
        def stream(self):
            return sys.stderr

        @stream.setter
        def stream(self, _value) -> None:
            pass

    return Stderr()


class _Log:
    """amqpcap's logger (`log.warning(...)`...), imported and set up when first used."""

    def __getattr__(self, name: str):
        return getattr(_logger(), name)


log = _Log()


def end_logging() -> None:
    """Flush what was logged (logging.shutdown), if anything was."""
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.shutdown()


class JobDisplay:
    """One live view of a running job: bytes read, segments decoded, records made, the phase, the
    time so far and an estimate of what is left. A progress bar (rich) on a terminal; elsewhere
    (cron, CI) a plain line every `every` seconds. It polls the counters the tasks leave in the
    staging area (amqpcap.job.progress), so it moves while a big file is being read."""

    def __init__(self, total_bytes: int, files: int, every: float = 15.0, terminal: bool | None = None) -> None:
        import threading
        import time
        self.total_bytes = max(total_bytes, 1)
        self.files = files
        self.every = every
        self.terminal = sys.stderr.isatty() if terminal is None else terminal
        self.started = time.monotonic()
        self.staging: str | None = None
        self.name = "starting"
        self.segments = 0  # staged segments to decode, once known
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="progress", daemon=True)
        self.log = _logger()

    def start(self, staging: str) -> None:
        self.staging = staging
        self.thread.start()

    def phase(self, name: str, segments: int | None = None) -> None:
        self.name = name
        if segments is not None:
            self.segments = segments
        if not self.terminal:
            self.log.info(self._line(self._counters()))

    def stop(self) -> None:
        self.done.set()
        if self.thread.is_alive():
            self.thread.join()

    def _counters(self) -> dict:
        from amqpcap.job.progress import totals
        return totals(self.staging) if self.staging else {}

    def _loop(self) -> None:
        if not self.terminal:
            while not self.done.wait(self.every):
                self.log.info(self._line(self._counters()))
            return
        from rich.console import Console
        from rich.live import Live
        with Live(console=Console(stderr=True), refresh_per_second=4, transient=True) as live:
            while not self.done.wait(0.25):
                live.update(self._line(self._counters()))

    def _line(self, counters: dict) -> str:
        import time
        elapsed = time.monotonic() - self.started
        read = counters.get("file_bytes", 0) / self.total_bytes  # (amqpcap.job.stages.read.FileShare)
        decoded = counters.get("segments", 0)
        parts = [f"{self.name:<13}", f"read {min(read, 1):.0%} of {self.files} files "
                 f"({self.total_bytes / 1e6:,.0f} MB; {counters.get('bytes', 0) / 1e6:,.0f} MB of packets)"]
        if self.segments:
            parts.append(f"decoded {min(decoded / self.segments, 1):.0%} ({counters.get('records', 0):,} records)")
        parts.append(f"{_clock(elapsed)} elapsed")
        fraction = min(read, 1) * 0.4 + (decoded / self.segments if self.segments else 0) * 0.6
        if 0.02 < fraction < 1:
            parts.append(f"ETA {_clock(elapsed * (1 - fraction) / fraction)}")
        return " · ".join(parts)


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"
