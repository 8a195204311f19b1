"""Independent cross-check: decode each capture with tshark and compare per-direction method
counts, reply codes and heartbeat frames with <scenario>.expected.json."""
from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

from .raw import BY_ID

FIELDS = ["tcp.dstport", "amqp.type", "amqp.method.class", "amqp.method.method",
          "amqp.method.arguments.reply_code", "amqp.method.arguments.multiple",
          "amqp.method.arguments.redelivered", "amqp.header.body-size"]
WITH_CODE = ("connection.close", "channel.close", "basic.return")


def tshark_counts(path: Path) -> dict:
    cmd = ["tshark", "-r", str(path), "-d", "tcp.port==5672,amqp", "-Y", "amqp", "-T", "fields",
           "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    # Other protocols in a capture need no filter here: tshark's AMQP 1.0 frames (amqp10_mixed) have
    # no amqp.method.* fields and amqp.type 0 (AMQP) or 1 (SASL), never 8, so they add no method
    # and no heartbeat; refused HTTP/MQTT/STOMP/TLS bytes (other_protocols) decode as no AMQP frame.
    methods = {"C>S": Counter(), "S>C": Counter()}
    hb = Counter()
    codes = {m: [] for m in WITH_CODE}
    ack_multiple = redelivered = max_body = 0
    for line in out.splitlines():
        dport, types, classes, meths, rcodes, mult, redel, bsize = (line.split("\t") + [""] * 8)[:8]
        d = "C>S" if dport == "5672" else "S>C"
        hb[d] += [t for t in types.split(",") if t].count("8")
        rc = [int(x) for x in rcodes.split(",") if x]
        mult = [x in ("1", "True") for x in mult.split(",") if x]
        redel = [x in ("1", "True") for x in redel.split(",") if x]
        max_body = max([max_body] + [int(x) for x in bsize.split(",") if x])
        for c, m in zip([x for x in classes.split(",") if x], [x for x in meths.split(",") if x]):
            name = BY_ID.get((int(c), int(m)), f"?{c}.{m}")
            methods[d][name] += 1
            if name in WITH_CODE and rc:
                codes[name].append(rc.pop(0))
            if name in ("basic.ack", "basic.nack") and mult:
                if mult.pop(0) and name == "basic.ack" and d == "C>S":
                    ack_multiple += 1
            if name in ("basic.deliver", "basic.get-ok") and redel:
                redelivered += redel.pop(0)
    return {"methods": methods, "heartbeats": dict(hb), "reply_codes": codes,
            "messages": {"acked_multiple_frames": ack_multiple, "redelivered": redelivered,
                         "max_body_size": max_body}}


def derived_messages(got: dict) -> dict:
    """The message counters that follow from tshark's per-method counts."""
    cs, sc = got["methods"]["C>S"], got["methods"]["S>C"]
    return dict(got["messages"], published=cs["basic.publish"], delivered=sc["basic.deliver"],
                get_ok=sc["basic.get-ok"], get_empty=sc["basic.get-empty"], returned=sc["basic.return"],
                confirm_acks=sc["basic.ack"], confirm_nacks=sc["basic.nack"], rejected=cs["basic.reject"])


def compare(exp: dict, got: dict) -> list[str]:
    diffs = []
    for d in ("C>S", "S>C"):
        e, g = Counter(exp["methods"][d]), got["methods"][d]
        for name in sorted(set(e) | set(g)):
            if name.startswith("?"):  # class/method id not in the 0-9-1 spec: see the notes
                diffs.append(f"note: tshark saw {g[name]} {d} method frame(s) with unknown id {name[1:]}")
                continue
            if e[name] != g[name]:
                diffs.append(f"{d} {name}: expected {e[name]}, tshark {g[name]}")
    for m in WITH_CODE:
        if exp["reply_codes"][m] != got["reply_codes"][m]:
            diffs.append(f"{m} codes: expected {exp['reply_codes'][m]}, tshark {got['reply_codes'][m]}")
    for k, v in derived_messages(got).items():
        if exp["messages"][k] != v:
            diffs.append(f"messages.{k}: expected {exp['messages'][k]}, tshark {v}")
    for d in ("C>S", "S>C"):
        if got["heartbeats"].get(d, 0) < exp["heartbeats_min"][d]:
            diffs.append(f"heartbeats {d}: expected >= {exp['heartbeats_min'][d]}, tshark {got['heartbeats'].get(d, 0)}")
    return diffs


def resync_copy(path: Path) -> tuple[Path, int]:
    """tshark cannot resynchronise an AMQP stream whose capture starts inside a frame.  Give it a copy
    that starts at the first client packet whose payload begins with a complete frame
    (type 1-8, size fits, frame-end 0xCE).  Returns (copy, first kept frame number)."""
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number", "-e", "tcp.dstport",
                          "-e", "tcp.payload"], capture_output=True, text=True, check=True).stdout
    first = None
    for line in out.splitlines():
        num, dport, payload = (line.split("\t") + ["", ""])[:3]
        b = bytes.fromhex(payload.replace(":", "")) if payload else b""
        if dport == "5672" and len(b) >= 8 and b[0] in (1, 2, 3, 8):
            size = int.from_bytes(b[3:7], "big")
            if len(b) >= 8 + size and b[7 + size] == 0xCE:
                first = int(num)
                break
    if first is None:
        raise RuntimeError("no frame boundary found")
    dst = Path("/tmp") / f"resync-{path.name}"
    subprocess.run(["editcap", "-r", str(path), str(dst), f"{first}-4294967295"], check=True, capture_output=True)
    return dst, first


def verify_cuts(out_dir: Path, exp: dict) -> list[str]:
    """long_connection's `cuts`: (1) tshark's methods in records[:index] are the methods_before
    the scenario knew; (2) tshark reassembles the record before the cut and the record after it
    into the same AMQP PDU, a body frame (type 3) of the announced size, which starts in the record
    before the cut."""
    import gzip

    from .pcaprecords import write_records
    src = out_dir / exp["capture"]["file"]
    plain = Path("/tmp") / f"cuts-{exp['scenario']}.pcap"
    opener = gzip.open if src.name.endswith(".gz") else open
    with opener(src, "rb") as f:
        plain.write_bytes(f.read())
    rows = {}
    out = subprocess.run(["tshark", "-2", "-r", str(plain), "-d", "tcp.port==5672,amqp", "-T", "fields",
                          "-e", "frame.number", "-e", "tcp.dstport", "-e", "tcp.len", "-e", "tcp.reassembled_in",
                          "-e", "amqp.type", "-e", "amqp.length", "-E", "occurrence=a", "-E", "aggregator=,"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        num, dport, tlen, rin, types, lengths = (line.split("\t") + [""] * 6)[:6]
        rows[int(num)] = (dport, int(tlen or 0), rin, types.split(",") if types else [],
                          [int(x) for x in lengths.split(",") if x])
    diffs = []
    for cut in exp["cuts"]:
        i, name = cut["index"], cut["name"]
        night = Path("/tmp") / f"cut-{exp['scenario']}-{i}.pcap"
        write_records(plain, night, 0, i)
        got = tshark_counts(night)["methods"]
        for d in ("C>S", "S>C"):
            want = Counter(cut["methods_before"][d])
            if got[d] != want:
                diffs.append(f"cut {name} ({i}) {d}: methods before differ: expected {dict(want)}, tshark {dict(got[d])}")
        before, after = rows[i], rows[i + 1]        # tshark frame numbers are 1-based
        size = cut["inside"]["body_frame_size"]
        ok = before[0] == after[0] == "5672" and before[1] and after[1] and before[2] and \
            before[2] in (after[2], str(i + 1))
        if ok:
            pdu = int(before[2])
            kinds = rows[pdu][3]
            ok = bool(kinds) and kinds[0 if pdu != i + 1 else -1] == "3" and size in rows[pdu][4]
            prev = next((n for n in range(i - 1, 0, -1) if rows[n][0] == "5672" and rows[n][1]), None)
            ok = ok and (prev is None or rows[prev][2] != before[2])  # the frame starts in the record before
        if not ok:
            diffs.append(f"cut {name} ({i}): records {i - 1}/{i} are not inside one body frame for tshark: "
                         f"{before} / {after}")
    return diffs


def verify_all(out_dir: Path, names) -> bool:
    ok = True
    print("\n| capture | tshark vs expected.json |\n|---|---|")
    for n in names:
        ej = out_dir / f"{n}.expected.json"
        if not ej.exists():
            print(f"| {n} | no expected.json |"); ok = False
            continue
        exp = json.loads(ej.read_text())
        got = tshark_counts(out_dir / exp["capture"]["file"])
        diffs = compare(exp, got)
        hbs = got["heartbeats"]
        if diffs and exp["capture"]["starts_mid_stream"] and not any(got["methods"][d] for d in got["methods"]):
            diffs = ["tshark decodes no AMQP at all: it cannot resynchronise a stream that starts inside a frame"]
        extra = f" (heartbeat frames C>S {hbs.get('C>S', 0)}, S>C {hbs.get('S>C', 0)})" if any(hbs.values()) else ""
        print(f"| {exp['capture']['file']} | " + ("agree" + extra if not diffs else
                                                   ("agree; " if all(x.startswith("note:") for x in diffs) else "DIFFER: ")
                                                   + "; ".join(diffs)) + " |")
        if diffs and exp["capture"]["starts_mid_stream"] and not any(got["methods"][d] for d in got["methods"]):
            copy, first = resync_copy(out_dir / exp["capture"]["file"])
            rdiffs = compare(exp, tshark_counts(copy))
            print(f"| {exp['capture']['file']} (from packet {first}, tshark resynchronised by hand) | "
                  + ("agree" if not rdiffs else "DIFFER: " + "; ".join(rdiffs)) + " |")
            diffs = rdiffs
        if "cuts" in exp:
            cdiffs = verify_cuts(out_dir, exp)
            print(f"| {exp['capture']['file']} cuts at records {[c['index'] for c in exp['cuts']]} | "
                  + ("agree (methods before each cut; record before/after inside one body frame)" if not cdiffs
                     else "DIFFER: " + "; ".join(cdiffs)) + " |")
            diffs = diffs + cdiffs
        ok = ok and all(x.startswith("note:") for x in diffs)
    return ok
