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


SERVER_PORTS = ("5672",)
TLS_SERVER_PORTS = ("5671", "5672", "5676")   # tls.py: RabbitMQ TLS, RabbitMQ plain, stunnel


def tls_args(path: Path, exp: dict | None) -> list[str]:
    """tshark options that decrypt a TLS sample with its key log (<scenario>.keys beside it)."""
    if not exp or "tls" not in exp:
        return []
    keys = path.with_name(f"{exp['scenario']}.keys")
    return ["-o", f"tls.keylog_file:{keys}", "-d", "tcp.port==5671,tls", "-d", "tls.port==5671,amqp",
            "-d", "tcp.port==5676,tls", "-d", "tls.port==5676,amqp"]


def tshark_counts(path: Path, exp: dict | None = None, stream: int | None = None) -> dict:
    servers = TLS_SERVER_PORTS if exp and "tls" in exp else SERVER_PORTS
    cmd = ["tshark", "-r", str(path), *tls_args(path, exp), "-d", "tcp.port==5672,amqp",
           "-Y", "amqp" if stream is None else f"amqp && tcp.stream == {stream}", "-T", "fields",
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
        d = "C>S" if dport in servers else "S>C"
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


def tcp_retransmissions(path: Path) -> list[dict]:
    """TCP retransmissions in a capture, as tshark's analysis finds them: real duplicates on the wire
    (e.g. a tail-loss-probe retransmission while the broker delays its ACK), not capture loss."""
    out = subprocess.run(["tshark", "-r", str(path), "-Y", "tcp.analysis.retransmission || tcp.analysis.lost_segment",
                          "-T", "fields", "-e", "frame.number", "-e", "tcp.srcport", "-e", "tcp.dstport",
                          "-e", "tcp.seq", "-e", "tcp.len"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        num, sp, dp, seq, ln = line.split("\t")
        rows.append({"frame": int(num), "src_port": int(sp), "dst_port": int(dp), "relative_seq": int(seq),
                     "tcp_len": int(ln), "kind": "retransmission (duplicate of an earlier segment)"})
    return rows


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
    from .scenarios import SCENARIOS
    ok = True
    print("\n| capture | tshark vs expected.json |\n|---|---|")
    tls_reports = []
    for n in names:
        ej = out_dir / SCENARIOS[n].out_dir / f"{n}.expected.json" if n in SCENARIOS else out_dir / f"{n}.expected.json"
        if not ej.exists():
            print(f"| {n} | no expected.json |"); ok = False
            continue
        exp = json.loads(ej.read_text())
        got = tshark_counts(ej.parent / exp["capture"]["file"], exp)
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
        if "tls" in exp:
            tdiffs, report = verify_tls(ej.parent / exp["capture"]["file"], exp)
            print(f"| {exp['capture']['file']} TLS handshakes and per-connection methods | "
                  + ("agree" if not tdiffs else "DIFFER: " + "; ".join(tdiffs)) + " |")
            tls_reports.append((exp["capture"]["file"], report))
            diffs = diffs + tdiffs
        ok = ok and all(x.startswith("note:") for x in diffs)
    for f, report in tls_reports:
        print(f"\n{f} (tshark, per TCP connection):")
        for line in report:
            print("  " + line)
    return ok


# ------------------------------------------------------------------ TLS samples
# the suites tls.py uses, by code point (tshark prints the ServerHello's as a number)
SUITES = {0xc02f: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", 0xc030: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
          0xcca8: "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", 0xc013: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
          0xc027: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", 0xc028: "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
          0x009c: "TLS_RSA_WITH_AES_128_GCM_SHA256", 0x1301: "TLS_AES_128_GCM_SHA256",
          0x1302: "TLS_AES_256_GCM_SHA384", 0x1303: "TLS_CHACHA20_POLY1305_SHA256"}
HRR_RANDOM = "cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c"
TLS_FIELDS = ["tcp.stream", "tcp.srcport", "tcp.dstport", "tls.handshake.type", "tls.handshake.ciphersuite",
              "tls.handshake.extensions_server_name", "tls.handshake.extensions.supported_version",
              "tls.handshake.random", "tls.handshake.extension.type", "tls.handshake.extension.len",
              "tls.handshake.extensions_alpn_str", "tls.handshake.key_update.request_update", "tls.handshake.version"]


def _ints(x: str) -> list[int]:
    return [int(v, 0) for v in x.split(",") if v]


def tls_handshakes(path: Path, exp: dict) -> dict:
    """Per TCP connection (by client port): what tshark, given the key log, sees of its TLS
    handshake: version, the ServerHello's suite, SNI, ALPN offered and chosen, encrypt-then-MAC,
    resumption, HelloRetryRequest and KeyUpdates per direction."""
    cmd = ["tshark", "-r", str(path), *tls_args(path, exp), "-Y", "tls.handshake", "-T", "fields",
           "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
    for f in TLS_FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    conns: dict[int, dict] = {}
    for line in out.splitlines():
        (stream, sport, dport, types, suites, sni, svers, randoms, etypes, elens, alpn, kureq,
         hvers) = (line.split("\t") + [""] * 13)[:13]
        to_server = dport in TLS_SERVER_PORTS
        port = int(sport) if to_server else int(dport)
        c = conns.setdefault(port, {"stream": int(stream), "server_port": int(dport if to_server else sport),
                                    "client_hellos": 0, "server_hellos": [], "sni": None, "alpn_offered": [],
                                    "alpn": None, "server_ext": [], "ticket_offered": False, "certificate": False,
                                    "key_updates": {"C>S": [], "S>C": []}, "version": None, "suite": None})
        types = _ints(types)
        if to_server:
            if 1 in types:
                c["client_hellos"] += 1
                c["sni"] = sni or None
                c["alpn_offered"] = [a for a in alpn.split(",") if a]
                ets, els = _ints(etypes), _ints(elens)
                c["ticket_offered"] = any(t == 35 and n > 0 for t, n in zip(ets, els))
        else:
            if 2 in types:
                rnd = randoms.split(",")[0].replace(":", "")
                c["server_hellos"].append(rnd)
                c["suite"] = SUITES.get(_ints(suites)[-1], suites)
                sv = _ints(svers)
                c["version"] = "TLSv1.3" if 0x0304 in sv else {0x0303: "TLSv1.2"}.get(_ints(hvers)[0], hvers)
                c["server_ext"] = _ints(etypes)
            elif etypes:
                c["server_ext"] += _ints(etypes)   # TLS 1.3 EncryptedExtensions (decrypted)
            if alpn:
                c["alpn"] = alpn.split(",")[0]
            if 11 in types:
                c["certificate"] = True
        if 24 in types:
            c["key_updates"]["C>S" if to_server else "S>C"] += _ints(kureq)
    return conns


def verify_tls(path: Path, exp: dict) -> tuple[list[str], list[str]]:
    """Each `tls` entry against tshark's view of the same connection (found by client port), and
    each connection's AMQP methods per direction against tshark's for its TCP stream (nothing for a
    TLS connection the key log does not cover)."""
    conns = tls_handshakes(path, exp)
    diffs, report = [], []
    for i, e in enumerate(exp["tls"]):
        c = conns.get(e["client_port"])
        tag = f"connection {i + 1} (port {e['client_port']})"
        if not e["tls"]:
            if c:
                diffs.append(f"{tag}: plain connection, but tshark saw a TLS handshake")
            report.append(f"{tag}: plain AMQP (no TLS handshake)")
            got = tshark_counts(path, exp, stream=_stream_of(path, e["client_port"]))["methods"]
            diffs += _method_diffs(tag, e["methods"], got)
            continue
        if not c:
            diffs.append(f"{tag}: no TLS handshake seen by tshark"); continue
        resumed = None
        if c["version"] == "TLSv1.3" and 41 in c["server_ext"]:
            resumed = "psk"
        elif c["version"] == "TLSv1.2" and not c["certificate"]:
            resumed = "ticket" if c["ticket_offered"] else "session-id"
        hrr = bool(c["server_hellos"]) and c["server_hellos"][0] == HRR_RANDOM
        seen = {"version": c["version"], "cipher_suite": c["suite"], "sni": c["sni"],
                "alpn_offered": c["alpn_offered"], "resumed": resumed, "hello_retry": hrr,
                "encrypt_then_mac": (22 in c["server_ext"]) if c["version"] == "TLSv1.2" else None}
        if e["key_logged"] or e["version"] == "TLSv1.2":   # TLS 1.3 ALPN is in EncryptedExtensions
            seen["alpn"] = c["alpn"]
        if e["key_logged"] and e["key_updates"] is not None:
            seen["key_updates"] = {d: len(v) for d, v in c["key_updates"].items()}
        for k, v in seen.items():
            if e[k] != v:
                diffs.append(f"{tag} {k}: expected {e[k]!r}, tshark {v!r}")
        if hrr and c["client_hellos"] != 2:
            diffs.append(f"{tag}: HelloRetryRequest but {c['client_hellos']} ClientHellos")
        ku = {d: v for d, v in c["key_updates"].items() if v}
        report.append(f"{tag} -> {c['server_port']}: {c['version']}, ciphersuite {c['suite']}, SNI {c['sni']}, "
                      f"ALPN offered {c['alpn_offered']} chosen {c['alpn']}, ClientHellos {c['client_hellos']}"
                      + (", HelloRetryRequest" if hrr else "") + (f", resumed ({resumed})" if resumed else "")
                      + (f", EtM {'yes' if seen['encrypt_then_mac'] else 'no'}" if c["version"] == "TLSv1.2" else "")
                      + (f", KeyUpdate request_update values {ku}" if ku else ""))
        got = tshark_counts(path, exp, stream=c["stream"])["methods"]
        if e["key_logged"]:
            diffs += _method_diffs(tag, e["methods"], got)
        elif any(got[d] for d in got):
            diffs.append(f"{tag}: not in the key log, but tshark decoded AMQP methods on it")
    return diffs, report


def _stream_of(path: Path, client_port: int) -> int:
    out = subprocess.run(["tshark", "-r", str(path), "-Y", f"tcp.port == {client_port}", "-T", "fields",
                          "-e", "tcp.stream", "-c", "1"], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def _method_diffs(tag: str, want: dict, got: dict) -> list[str]:
    out = []
    for d in ("C>S", "S>C"):
        w, g = Counter(want[d]), got[d]
        for name in sorted(set(w) | set(g)):
            if w[name] != g[name]:
                out.append(f"{tag} {d} {name}: expected {w[name]}, tshark {g[name]}")
    return out
