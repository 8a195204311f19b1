"""Record the AMQP sample corpus: data/samples/<scenario>.{pcap,pcapng,pcap.gz} + .expected.json.

Run from the repository root:
    python -m tools.record_samples                 # every scenario, then the tshark cross-check
    python -m tools.record_samples confirms heartbeats   # only these scenarios
    python -m tools.record_samples --list
    python -m tools.record_samples --verify-only   # tshark cross-check of what is on disk
    python -m tools.record_samples --out /tmp/s consumer_ack_timeout   # write (and check) elsewhere
    python -m tools.record_samples --stop          # stop the broker (and stunnel)

The client libraries live in a venv of their own (/tmp/recvenv, pinned by requirements.txt next
to this file); if they are not importable the program creates the venv and re-executes itself in it.
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
OUT = REPO / "data" / "samples"
VENV = Path(os.environ.get("AMQPCAP_RECORDER_VENV", "/tmp/recvenv"))


def _ensure_venv() -> None:
    try:
        import aio_pika  # noqa: F401
        import amqp  # noqa: F401
        import cryptography  # noqa: F401  (tls.py: the test CA and certificate, certificate names)
        import kombu  # noqa: F401
        import pamqp  # noqa: F401
        import pika  # noqa: F401
        return
    except ImportError:
        pass
    py = VENV / "bin" / "python"
    if Path(sys.prefix).resolve() == VENV.resolve():
        raise SystemExit("client libraries missing from the recorder venv")
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "-r", str(HERE / "requirements.txt")], check=True)
    os.chdir(REPO)
    os.execv(str(py), [str(py), "-m", "tools.record_samples", *sys.argv[1:]])


class Ctx:
    def __init__(self, exp, cap, name="", out=OUT):
        self.exp, self.cap, self.name, self.out = exp, cap, name, out

    def start_capture(self):
        self.cap.start()


def _shown(path: Path) -> Path:
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path


def run_scenario(name: str, out_root: Path = OUT) -> None:
    from . import broker
    from .capture import Capture
    from .expect import Expect
    from .scenarios import SCENARIOS

    sc = SCENARIOS[name]
    conf, advanced = broker.ensure_broker(sc.tls_options, sc.broker_conf, sc.rabbit_env)
    broker.wait_no_connections()
    broker.reset_vhost()
    out = out_root / sc.out_dir
    out.mkdir(parents=True, exist_ok=True)
    ext = {"pcap": ".pcap", "pcapng": ".pcapng", "pcap.gz": ".pcap"}[sc.fmt]
    raw_path = out / f"{name}{ext}"
    final = out / (f"{name}.pcap.gz" if sc.fmt == "pcap.gz" else f"{name}{ext}")
    for p in (raw_path, final, out / f"{name}.keys"):   # .keys: the TLS scenarios' key log
        if p.exists():
            p.unlink()
    exp = Expect(name, " ".join(sc.description.split()))
    exp.broker = broker.broker_version()
    if sc.record_config:
        exp.broker_config = {"rabbitmq.conf": conf, "advanced.config": advanced,
                             "changed_settings": dict(sc.broker_conf or {}, **(sc.rabbit_env or {}))}
    cap = Capture(raw_path, interfaces=sc.interfaces, tool="dumpcap" if sc.fmt == "pcapng" else "tcpdump",
                  nano=sc.nano, bpf=sc.bpf, buffer_kib=sc.buffer_kib)
    ctx = Ctx(exp, cap, name, out)
    print(f"== {name}", flush=True)
    if not sc.manual_capture:
        cap.start()
    try:
        sc.fn(ctx)
    except BaseException:
        if cap.proc and cap.proc.poll() is None:
            cap.proc.terminate()
            cap.proc.wait()
        raise
    err = cap.stop()
    stats = [l for l in err.splitlines() if "packets" in l.lower() or "dropped" in l]
    print("   " + " | ".join(stats), flush=True)
    if getattr(ctx, "after_capture", None):  # facts that need the record numbers (long_connection's cuts)
        ctx.after_capture(raw_path)
    if sc.fmt == "pcap.gz":
        with open(raw_path, "rb") as src, gzip.GzipFile(final, "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
        raw_path.unlink()
    final.chmod(0o644)
    if (out / f"{name}.keys").exists():
        (out / f"{name}.keys").chmod(0o644)
    exp.capture = {"file": final.name, "format": sc.fmt, "link_types": list(sc.link_types),
                   "timestamp_resolution": "ns" if (sc.nano or sc.fmt == "pcapng") else "us",
                   "starts_mid_stream": bool(exp.capture.get("starts_mid_stream"))}
    if sc.record_config:
        from .verify import tcp_retransmissions
        exp.capture |= {"interface": sc.interfaces[0][0], "filter": sc.bpf, "tcpdump_stats": stats,
                        "tcp_retransmissions": tcp_retransmissions(final)}
    exp.write(out / f"{name}.expected.json")
    print(f"   wrote {_shown(final)} ({final.stat().st_size} bytes)", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.record_samples", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--verify-only", action="store_true", help="only run the tshark cross-check")
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--out", type=Path, default=OUT, metavar="DIR",
                    help=f"write the samples into DIR (and cross-check those), not {_shown(OUT)}")
    ap.add_argument("--stop", action="store_true", help="stop the broker (and stunnel) and exit")
    args = ap.parse_args(argv)
    if args.stop:
        from . import broker
        broker.stop_broker()
        return 0
    args.out = args.out.resolve()
    _ensure_venv()
    from .scenarios import SCENARIOS
    if args.list:
        for n, sc in SCENARIOS.items():
            print(f"{n:22s} {' '.join(sc.description.split())[:100]}")
        return 0
    names = args.scenarios or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario(s): {unknown}; see --list")
    if not args.verify_only:
        args.out.mkdir(parents=True, exist_ok=True)
        for n in names:
            run_scenario(n, args.out)
            time.sleep(0.5)
        if any(SCENARIOS[n].tls_options or SCENARIOS[n].broker_conf or SCENARIOS[n].rabbit_env
               for n in names):  # give the broker its usual configuration back
            from . import broker
            broker.ensure_broker()
    if args.no_verify:
        return 0
    from .verify import verify_all
    return 0 if verify_all(args.out, names) else 1


if __name__ == "__main__":
    if __package__ in (None, ""):  # python tools/record_samples/record.py
        sys.path.insert(0, str(REPO))
        os.chdir(REPO)
        from tools.record_samples.record import main as _main
        sys.exit(_main())
    sys.exit(main())
