"""AMQP 0-9-1 over TLS (AMQPS): captures with the NSS key log their clients wrote, into
data/samples/tls/ (<name>.pcap, <name>.keys, <name>.expected.json).

Two TLS servers, both on loopback: RabbitMQ's own listener on 5671 (Erlang/OTP ssl; its options in
broker.TLS_DEFAULT_OPTIONS, a scenario may restart the broker with others) and stunnel4 on 5676
(OpenSSL, forwarding plain AMQP to the broker's 5673, which no capture filter includes), for what
Erlang's TLS does not do: encrypt-then-MAC and TLS 1.2 session tickets.

Every connection is one sub-Expect (its own methods, messages, reply codes, by construction as in
scenarios.py) merged into the scenario's Expect when a decoder given the key log can read it, plus
one `tls` entry.  The TLS facts of an entry come from the client's own TLS stack: the socket
(version(), cipher(), selected_alpn_protocol(), session_reused, getpeercert()) and the handshake
messages it wrote and read (Python's SSLContext._msg_callback, or Go's tls.ConnectionState), never
from the capture; tshark with the key log checks them afterwards (verify.py).

Python's ssl cannot choose TLS 1.3 cipher suites, key-share groups or switch encrypt-then-MAC off;
connections that need that run in a child process (tls_child.py) whose OPENSSL_CONF says so, and
report their sub-Expect and entry as JSON."""
from __future__ import annotations

import json
import os
import socket
import ssl
import struct
import subprocess
import sys
from pathlib import Path

from . import broker
from .broker import HOST4, PASSWORD, STUNNEL_PORT, TLS_NAME, TLS_PORT, USER, VHOST
from .expect import Expect
from .raw import RawClient
from .scenarios import PIKA_CH, pump, scenario

HERE = Path(__file__).resolve().parent
BPF = "tcp port 5671 or tcp port 5672 or tcp port 5676"
TLS_KW = dict(out_dir="tls", bpf=BPF, buffer_kib=65536)
SERVER_PORTS = (TLS_PORT, broker.PORT, STUNNEL_PORT)

# OpenSSL's cipher names -> IANA names (what cipher()[0] says -> what the entries say)
IANA = {
    "ECDHE-RSA-AES128-GCM-SHA256": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "ECDHE-RSA-AES256-GCM-SHA384": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "ECDHE-RSA-CHACHA20-POLY1305": "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "ECDHE-RSA-AES128-SHA": "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "ECDHE-RSA-AES128-SHA256": "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "ECDHE-RSA-AES256-SHA384": "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
    "AES128-GCM-SHA256": "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_AES_128_GCM_SHA256": "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384": "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256": "TLS_CHACHA20_POLY1305_SHA256",
}
HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
HS_SERVER_HELLO, HS_NEW_SESSION_TICKET, HS_KEY_UPDATE, HS_CLIENT_HELLO = 2, 4, 24, 1
EXT_ENCRYPT_THEN_MAC, EXT_EXTENDED_MASTER_SECRET = 22, 23


def pika_tls_label() -> str:
    import importlib.metadata as md
    return f"pika {md.version('pika')} (Python {sys.version.split()[0]} ssl, {ssl.OPENSSL_VERSION})"


def raw_tls_label() -> str:
    return f"raw-socket over Python {sys.version.split()[0]} ssl ({ssl.OPENSSL_VERSION})"


# ------------------------------------------------------------------ the client's own TLS facts
class HandshakeTrace:
    """Every handshake message the client's OpenSSL wrote or read, decrypted (TLS 1.3's
    encrypted ones and post-handshake messages included), through SSLContext._msg_callback."""

    def __init__(self, context: ssl.SSLContext):
        self.messages: list[tuple[str, int, bytes]] = []
        context._msg_callback = self._cb

    def _cb(self, conn, direction, version, content_type, msg_type, data):
        if int(content_type) == 22 and data:
            self.messages.append((direction, data[0], bytes(data)))

    def clear(self):
        del self.messages[:]

    def of(self, direction: str, hs_type: int) -> list[bytes]:
        return [d for dr, t, d in self.messages if dr == direction and t == hs_type]

    def server_hellos(self) -> list[bytes]:
        return self.of("read", HS_SERVER_HELLO)

    def hello_retry(self) -> bool:
        sh = self.server_hellos()
        return bool(sh) and sh[0][6:38] == HRR_RANDOM

    def server_extensions(self) -> list[int]:
        """Extension types of the (last, i.e. real) ServerHello."""
        sh = self.server_hellos()[-1]
        p = 4 + 2 + 32
        p += 1 + sh[p] + 2 + 1
        end = p + 2 + struct.unpack_from(">H", sh, p)[0]
        p += 2
        out = []
        while p < end:
            t, n = struct.unpack_from(">HH", sh, p)
            out.append(t)
            p += 4 + n
        return out

    def key_updates(self) -> dict:
        """KeyUpdate messages per direction ("C>S" written by the client) and their request_update
        octets (1 = update_requested)."""
        w, r = self.of("write", HS_KEY_UPDATE), self.of("read", HS_KEY_UPDATE)
        return {"C>S": len(w), "S>C": len(r), "requested": {"C>S": [d[4] for d in w], "S>C": [d[4] for d in r]}}


def client_context(keylog: Path | None, *, max_version=None, min_version=None, ciphers: str | None = None,
                   alpn=("amqp",)) -> tuple[ssl.SSLContext, HandshakeTrace]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)       # verifies the chain and the host name
    ctx.load_verify_locations(str(broker.TLS_DIR / "ca.pem"))
    if max_version:
        ctx.maximum_version = getattr(ssl.TLSVersion, max_version)
    if min_version:
        ctx.minimum_version = getattr(ssl.TLSVersion, min_version)
    if ciphers:
        ctx.set_ciphers(ciphers)
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    if keylog:
        ctx.keylog_filename = str(keylog)
    return ctx, HandshakeTrace(ctx)


def cert_names(sock: ssl.SSLSocket) -> tuple[str, str]:
    from cryptography import x509
    cert = x509.load_der_x509_certificate(sock.getpeercert(binary_form=True))
    return cert.subject.rfc4514_string(), cert.issuer.rfc4514_string()


def tls_entry(sock: ssl.SSLSocket, trace: HandshakeTrace, *, server_port: int, alpn_offered, key_logged: bool,
              client_library: str, offered_session: ssl.SSLSession | None = None) -> dict:
    version = sock.version()
    resumed = None
    if sock.session_reused:
        resumed = "psk" if version == "TLSv1.3" else ("ticket" if offered_session.has_ticket else "session-id")
    exts = trace.server_extensions()
    subject, issuer = cert_names(sock)
    ku = trace.key_updates()
    return {
        "client_port": sock.getsockname()[1], "server_port": server_port, "tls": True, "version": version,
        "cipher_suite": IANA[sock.cipher()[0]], "sni": TLS_NAME, "alpn_offered": list(alpn_offered),
        "alpn": sock.selected_alpn_protocol(),
        "encrypt_then_mac": (EXT_ENCRYPT_THEN_MAC in exts) if version == "TLSv1.2" else None,
        "resumed": resumed, "hello_retry": trace.hello_retry(),
        "key_updates": {"C>S": ku["C>S"], "S>C": ku["S>C"]},
        "key_logged": key_logged, "cert_subject": subject, "cert_issuer": issuer,
        "client_library": client_library,
        # not part of the agreed entry; read by the scenario for its notes, then dropped
        "_extra": {"extended_master_secret": EXT_EXTENDED_MASTER_SECRET in exts if version == "TLSv1.2" else None,
                   "server_extensions": exts, "key_update_requested": ku["requested"],
                   "new_session_tickets": len(trace.of("read", HS_NEW_SESSION_TICKET)),
                   "client_hellos": len(trace.of("write", HS_CLIENT_HELLO)),
                   "client_random": trace.of("write", HS_CLIENT_HELLO)[0][6:38].hex(),
                   "session_has_ticket": bool(sock.session and sock.session.has_ticket)},
    }


def plain_entry(port: int, client_library: str) -> dict:
    return {"client_port": port, "server_port": broker.PORT, "tls": False, "version": None, "cipher_suite": None,
            "sni": None, "alpn_offered": [], "alpn": None, "encrypt_then_mac": None, "resumed": None,
            "hello_retry": False, "key_updates": None, "key_logged": False, "cert_subject": None,
            "cert_issuer": None, "client_library": client_library}


# ------------------------------------------------------------------ per-connection bookkeeping
def sub_expect() -> Expect:
    return Expect("", "")


def finish_entry(entry: dict, sub: Expect) -> dict:
    entry["methods"] = {d: dict(sorted((k, v) for k, v in c.items() if v)) for d, c in sub.methods.items()}
    entry["large_body_bytes"] = sub.messages["max_body_size"]   # the connection's largest body, 0 if none
    return entry


def merge(exp: Expect, sub: dict, decodable: bool) -> None:
    """Add one connection's facts (sub.to_dict()) to the scenario's. A connection a decoder cannot
    decrypt adds only itself to `connections` (and its client label)."""
    for c in sub["clients"]:
        exp.client(c)
    exp.connections += sub["connections"]
    exp.ip_versions.update(sub["ip_versions"])
    if not decodable:
        return
    for m in sub["auth_mechanisms"]:
        if m not in exp.auth_mechanisms:
            exp.auth_mechanisms.append(m)
    for u in sub["users"]:
        if u not in exp.users:
            exp.users.append(u)
    exp.channels_opened += sub["channels_opened"]
    for d in ("C>S", "S>C"):
        exp.methods[d].update(sub["methods"][d])
        exp.heartbeats_min[d] += sub["heartbeats_min"][d]
    for k, v in sub["messages"].items():
        if k == "max_body_size":
            exp.max_body(v)
        else:
            exp.msg(k, v)
    for k, v in sub["reply_codes"].items():
        exp.reply_codes[k] += v


# ------------------------------------------------------------------ pika over TLS
def pika_tls_connect(sub: Expect, context: ssl.SSLContext, port: int = TLS_PORT):
    import pika
    params = pika.ConnectionParameters(host=HOST4, port=port, virtual_host=VHOST,
                                       credentials=pika.PlainCredentials(USER, PASSWORD),
                                       ssl_options=pika.SSLOptions(context, server_hostname=TLS_NAME))
    conn = pika.BlockingConnection(params)
    sub.lib_connect(pika_tls_label(), USER, "PLAIN")
    return conn


def pika_sock(conn) -> ssl.SSLSocket:
    return conn._impl._transport._sock


def pika_work(sub: Expect, conn, q: str, large: int = 0, bodies=(), steps=None, before_body=None) -> None:
    """The traffic of one pika connection, counted as it is made: queue.declare; 2 publishes
    without confirms; confirm.select and 2 publishes each awaited (one basic.ack each); a consumer
    that acks the 4 deliveries one by one; basic.cancel; one more confirmed publish; basic.get of
    it and its ack; queue.delete; channel.close; connection.close.  large: the size of an extra
    confirmed message published, consumed and acked with the others (frame_max 131072: several
    body frames each way).  bodies: sizes of more messages like it (tls13_key_update).  steps: a
    callable run between the phases (tls_mixed_plain interleaves two connections with it).
    before_body(i): run before the i-th of those extra publishes (tls13_key_update)."""
    step = steps or (lambda: None)
    ch = conn.channel(); sub.lib_channel()
    ch.queue_declare(q); sub.rpc("queue.declare")
    step()
    small = [f"{q} message {i}".encode() for i in range(5)]
    for b in small[:2]:
        ch.basic_publish("", q, b); sub.c("basic.publish"); sub.msg("published"); sub.max_body(len(b))
    step()
    ch.confirm_delivery(); sub.rpc("confirm.select")
    extra = ([large] if large else []) + list(bodies)
    for i, b in enumerate(small[2:4] + [bytes([0x41 + i % 26]) * n for i, n in enumerate(extra)]):
        if i >= 2 and before_body:
            before_body(i - 2)
        ch.basic_publish("", q, b)                   # BlockingChannel waits for the broker's ack
        sub.c("basic.publish"); sub.s("basic.ack")
        sub.msg("published"); sub.msg("confirm_acks"); sub.msg("confirmed_messages"); sub.max_body(len(b))
    step()
    n = 4 + len(extra)
    got = []
    tag = ch.basic_consume(q, lambda chan, m, p, b: got.append((m, b)))
    sub.rpc("basic.consume")
    pump(conn, lambda: len(got) == n, timeout=60)
    sub.s("basic.deliver", n); sub.msg("delivered", n)
    for m, _b in got:
        ch.basic_ack(m.delivery_tag); sub.c("basic.ack"); sub.msg("acked")
    ch.basic_cancel(tag); sub.rpc("basic.cancel")
    step()
    ch.basic_publish("", q, small[4]); sub.c("basic.publish"); sub.s("basic.ack")
    sub.msg("published"); sub.msg("confirm_acks"); sub.msg("confirmed_messages")
    m, _p, b = ch.basic_get(q, auto_ack=False)
    assert b == small[4], b
    sub.rpc("basic.get", reply="basic.get-ok"); sub.msg("get_ok")
    ch.basic_ack(m.delivery_tag); sub.c("basic.ack"); sub.msg("acked")
    ch.queue_delete(q); sub.rpc("queue.delete")
    step()
    ch.close(); sub.rpc("channel.close", code=PIKA_CH)


def pika_connection(spec: dict) -> tuple[dict, dict]:
    """One pika connection as the spec says; returns (sub-Expect as a dict, tls entry)."""
    keylog = Path(spec["keylog"]) if spec.get("keylog") else None
    alpn = spec.get("alpn", ["amqp"])
    ctx, trace = client_context(keylog, max_version=spec.get("max_version"), min_version=spec.get("min_version"),
                                ciphers=spec.get("ciphers"), alpn=alpn)
    sub = sub_expect()
    port = spec.get("port", TLS_PORT)
    conn = pika_tls_connect(sub, ctx, port)
    sock = pika_sock(conn)
    pika_work(sub, conn, spec["queue"], large=spec.get("large", 0), bodies=spec.get("bodies", ()))
    # the entry is read before close (the socket is gone after); KeyUpdates and tickets are counted
    # again after the close, when every message the client read or wrote has been traced
    entry = tls_entry(sock, trace, server_port=port, alpn_offered=alpn, key_logged=keylog is not None,
                      client_library=pika_tls_label())
    conn.close(); sub.lib_close()
    ku = trace.key_updates()
    entry["key_updates"] = {"C>S": ku["C>S"], "S>C": ku["S>C"]}
    entry["_extra"]["key_update_requested"] = ku["requested"]
    entry["_extra"]["new_session_tickets"] = len(trace.of("read", HS_NEW_SESSION_TICKET))
    return sub.to_dict(), finish_entry(entry, sub)


def openssl_conf(path: Path, **settings: str) -> Path:
    """An OpenSSL configuration whose system_default section applies to every SSL_CTX the child
    creates (Ciphersuites, Groups, Options = -EncryptThenMac, ...)."""
    body = "\n".join(f"{k} = {v}" for k, v in settings.items())
    path.write_text("openssl_conf = openssl_init\n\n[openssl_init]\nssl_conf = ssl_sect\n\n"
                    "[ssl_sect]\nsystem_default = system_default_sect\n\n"
                    f"[system_default_sect]\n{body}\n")
    return path


def child_connection(spec: dict, **conf: str) -> tuple[dict, dict]:
    """pika_connection(spec) in a child process whose OpenSSL reads `conf` (see openssl_conf)."""
    cfg = openssl_conf(Path("/tmp") / f"amqpcap-openssl-{spec['queue']}.cnf", **conf)
    env = dict(os.environ, OPENSSL_CONF=str(cfg))
    out = subprocess.run([sys.executable, "-m", "tools.record_samples.tls_child", json.dumps(spec)], env=env,
                         cwd=str(HERE.parent.parent), capture_output=True, text=True, timeout=180)
    if out.returncode:
        raise RuntimeError(f"child connection failed: {out.stderr[-3000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    got["entry"]["_extra"]["openssl_conf"] = conf
    return got["sub"], got["entry"]


# ------------------------------------------------------------------ a raw AMQP client on an ssl socket
class TlsRawClient(RawClient):
    """raw.RawClient on a Python ssl socket (it can be given a session to resume, which pika cannot)."""

    def __init__(self, exp, context: ssl.SSLContext, port: int = TLS_PORT, session=None):
        self.exp = exp
        s = socket.create_connection((HOST4, port), timeout=10.0)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = context.wrap_socket(s, server_hostname=TLS_NAME, session=session)
        self.buf = b""
        self.frame_max = 131072
        self.pending = []
        exp.connection(raw_tls_label())

    def close(self):   # keep the SSLSocket open for its session and facts; the caller closes it
        self.send_method(0, "connection.close", 200, "bye", 0, 0)
        self.expect("connection.close-ok")


def raw_work(r: TlsRawClient, q: str) -> None:
    """handshake; channel 1; queue.declare; one publish; basic.get (get-ok) and basic.ack;
    queue.delete; channel.close 200; connection.close 200."""
    exp = r.exp
    r.open(USER, PASSWORD, VHOST)
    r.channel(1)
    r.rpc(1, "queue.declare", 0, q, False, False, False, False, False, {})
    body = f"resumption {q}".encode()
    r.publish(1, "", q, body)
    r.send_method(1, "basic.get", 0, q, False)
    r.expect("basic.get-ok", 1)
    exp.msg("get_ok")
    _h, got = r.expect_content()
    assert got == body, got
    r.send_method(1, "basic.ack", 1, False)
    exp.msg("acked")
    r.rpc(1, "queue.delete", 0, q, False, False, False)
    r.close_channel(1)
    r.close()


# ------------------------------------------------------------------ scenario helpers
def keys_path(ctx) -> Path:
    return ctx.out / f"{ctx.name}.keys"


def record(ctx, entries: list, sub: dict, entry: dict) -> dict:
    merge(ctx.exp, sub, decodable=entry["key_logged"] or not entry["tls"])
    entries.append(entry)
    return entry


def done(ctx, entries: list[dict]) -> None:
    """Write the tls entries (without their _extra) and the versions every TLS sample names."""
    ctx.exp.tls = [{k: v for k, v in e.items() if k != "_extra"} for e in entries]
    ctx.exp.note(f"Servers: {versions_text(any(e['server_port'] == STUNNEL_PORT for e in entries))}.")


def versions_text(stunnel: bool) -> str:
    s = (f"port {TLS_PORT} is RabbitMQ's own TLS listener ({broker.erlang_versions()}); "
         f"clients use {ssl.OPENSSL_VERSION} through Python {sys.version.split()[0]}")
    if stunnel:
        s += (f"; port {STUNNEL_PORT} is {broker.stunnel_version()} ({broker.stunnel_openssl()}) terminating TLS "
              f"and forwarding plain AMQP to the broker's {broker.BACKEND_PORT}, which is not captured")
    return s


def key_log_labels(keys: Path) -> dict[str, list[str]]:
    """client random (hex) -> the labels of the key log's lines for it, in file order."""
    out: dict[str, list[str]] = {}
    for line in keys.read_text().splitlines() if keys.exists() else []:
        parts = line.split()
        if len(parts) == 3 and not line.startswith("#"):
            out.setdefault(parts[1].lower(), []).append(parts[0])
    return out


def describe(e: dict, labels: dict | None = None) -> str:
    x = e.get("_extra", {})
    if not e["tls"]:
        return f"port {e['client_port']}->{e['server_port']}; plain AMQP (no TLS, no key needed)"
    bits = [f"port {e['client_port']}->{e['server_port']}", e["version"],
            e["cipher_suite"] or "", f"ALPN {e['alpn'] or 'none'}"]
    if e["version"] == "TLSv1.2":
        bits.append(f"EtM {'yes' if e['encrypt_then_mac'] else 'no'}, extended master secret "
                    f"{'yes' if x.get('extended_master_secret') else 'no'}")
    if e["resumed"]:
        bits.append(f"resumed by {e['resumed']}")
    if x.get("new_session_tickets"):
        bits.append(f"{x['new_session_tickets']} NewSessionTicket(s) from the server")
    if e["hello_retry"]:
        bits.append(f"HelloRetryRequest, {x['client_hellos']} ClientHellos")
    if e["key_updates"] and (e["key_updates"]["C>S"] or e["key_updates"]["S>C"]):
        bits.append(f"KeyUpdate C>S {e['key_updates']['C>S']}, S>C {e['key_updates']['S>C']}")
    if x.get("openssl_conf"):
        bits.append("client OPENSSL_CONF " + ", ".join(f"{k} = {v}" for k, v in x["openssl_conf"].items()))
    bits.append("key-logged" if e["key_logged"] else "NOT in the key log")
    if labels is not None and x.get("client_random"):
        got = labels.get(x["client_random"], [])
        bits.append(f"key log lines for its client random: {', '.join(got) if got else 'none'}")
    return "; ".join(b for b in bits if b)


def conn_notes(ctx, entries: list[dict]) -> None:
    labels = key_log_labels(keys_path(ctx))
    ctx.exp.note("Connections in order: " + " | ".join(f"{i + 1}. {describe(e, labels)}"
                                                       for i, e in enumerate(entries)) + ".")


PIKA_NOTE = ("Each pika connection: handshake (PLAIN, heartbeat 60 s: none in the capture), channel 1, "
             "queue.declare, 2 publishes, confirm.select, 2 publishes each confirmed by one basic.ack, "
             "basic.consume with 4 deliveries each acked alone, basic.cancel, 1 confirmed publish, basic.get "
             "(get-ok) and its ack, queue.delete, channel.close 0, connection.close 200.")


# ================================================================== scenarios
@scenario("pika over TLS 1.2 to RabbitMQ's TLS listener (SNI rabbit.amqpcap.test, ALPN amqp offered and "
          "negotiated): one connection each with TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, "
          "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 and TLS_RSA_WITH_AES_128_GCM_SHA256 (RSA key exchange); "
          "each declares a queue, publishes (some with confirms), consumes with acks, basic.get, closes.",
          **TLS_KW)
def tls12_gcm(ctx):
    keys, entries = keys_path(ctx), []
    for i, suite in enumerate(("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384", "AES128-GCM-SHA256")):
        sub, e = pika_connection({"keylog": str(keys), "max_version": "TLSv1_2", "ciphers": suite,
                                  "queue": f"tls12.gcm.{i}"})
        record(ctx, entries, sub, e)
    assert [e["cipher_suite"] for e in entries] == ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                                                    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                                                    "TLS_RSA_WITH_AES_128_GCM_SHA256"], entries
    ctx.exp.note(PIKA_NOTE)
    conn_notes(ctx, entries)
    ctx.exp.note("Erlang's TLS 1.2 ServerHello carries renegotiation_info, ec_point_formats and ALPN only: no "
                 "extended master secret and no encrypt-then-MAC (OTP 25 implements neither) and no session "
                 "ticket (Erlang has no TLS 1.2 tickets). The RSA key-exchange connection is decryptable from its "
                 "CLIENT_RANDOM line like the others (no server key needed).")
    done(ctx, entries)


@scenario("pika over TLS 1.2 with TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 to RabbitMQ's TLS listener, the "
          "same traffic as tls12_gcm.", **TLS_KW)
def tls12_chacha(ctx):
    entries = []
    sub, e = pika_connection({"keylog": str(keys_path(ctx)), "max_version": "TLSv1_2",
                              "ciphers": "ECDHE-RSA-CHACHA20-POLY1305", "queue": "tls12.chacha"})
    record(ctx, entries, sub, e)
    assert e["cipher_suite"] == "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", e
    ctx.exp.note(PIKA_NOTE)
    conn_notes(ctx, entries)
    done(ctx, entries)


CBC_SUITES = ("ECDHE-RSA-AES128-SHA", "ECDHE-RSA-AES128-SHA256", "ECDHE-RSA-AES256-SHA384")


@scenario("TLS 1.2 CBC suites with HMAC-SHA1, HMAC-SHA256 and HMAC-SHA384 (TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, "
          "_AES_128_CBC_SHA256, _AES_256_CBC_SHA384), pika: each once to RabbitMQ (Erlang: MAC-then-encrypt, "
          "it has no encrypt-then-MAC), once to stunnel/OpenSSL with encrypt-then-MAC negotiated and once to "
          "stunnel with the client's EtM switched off (OPENSSL_CONF Options = -EncryptThenMac).", **TLS_KW)
def tls12_cbc(ctx):
    broker.ensure_stunnel()
    keys, entries = keys_path(ctx), []
    for i, suite in enumerate(CBC_SUITES):
        base = {"keylog": str(keys), "max_version": "TLSv1_2", "ciphers": suite}
        sub, e = pika_connection(dict(base, queue=f"tls12.cbc.erlang.{i}"))
        record(ctx, entries, sub, e)
        assert e["encrypt_then_mac"] is False, e
        sub, e = pika_connection(dict(base, queue=f"tls12.cbc.etm.{i}", port=STUNNEL_PORT))
        record(ctx, entries, sub, e)
        assert e["encrypt_then_mac"] is True, e
        sub, e = child_connection(dict(base, queue=f"tls12.cbc.noetm.{i}", port=STUNNEL_PORT),
                                  Options="-EncryptThenMac")
        record(ctx, entries, sub, e)
        assert e["encrypt_then_mac"] is False, e
    ctx.exp.note(PIKA_NOTE)
    conn_notes(ctx, entries)
    ctx.exp.note("encrypt_then_mac is whether the ServerHello the client read carries extension 22. Through "
                 "stunnel, ALPN is offered but not negotiated (stunnel sets no ALPN callback) and OpenSSL also "
                 "negotiates the extended master secret (extension 23) and issues a TLS 1.2 NewSessionTicket "
                 "(the client does not use it here). With EtM the records are IV | ciphertext | HMAC over the "
                 "ciphertext; without it the HMAC is inside the padded ciphertext (MAC-then-encrypt).")
    done(ctx, entries)


TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")
LARGE = 1_000_000


@scenario("pika over TLS 1.3 to RabbitMQ's TLS listener, three connections, one per suite "
          "(TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256; each client process "
          "restricted by OPENSSL_CONF Ciphersuites); the TLS_AES_128_GCM_SHA256 one also publishes and "
          "consumes a 1000000-byte message (many TLS records spanning TCP segments).", **TLS_KW)
def tls13(ctx):
    keys, entries = keys_path(ctx), []
    for i, suite in enumerate(TLS13_SUITES):
        spec = {"keylog": str(keys), "min_version": "TLSv1_3", "queue": f"tls13.{i}", "large": LARGE if i == 0 else 0}
        sub, e = child_connection(spec, Ciphersuites=suite)
        record(ctx, entries, sub, e)
        assert (e["version"], e["cipher_suite"]) == ("TLSv1.3", suite), e
    ctx.exp.note(PIKA_NOTE + f" Connection 1 adds one confirmed publish of a {LARGE}-byte body (bytes 'A'; "
                 f"frame_max 131072: 8 body frames, 7 of 131064 bytes) consumed and acked with the others "
                 f"(5 deliveries, 5 acks).")
    conn_notes(ctx, entries)
    ctx.exp.note("RabbitMQ's listener has session_tickets stateless: after each handshake Erlang sends "
                 "NewSessionTicket messages (counted above, from the client's trace), which share records' "
                 "stream with the AMQP bytes. Erlang also sends a ChangeCipherSpec record after its ServerHello "
                 "(middlebox compatibility), as does OpenSSL.")
    done(ctx, entries)


KU_BODIES = (20000,) * 6
KU_REQUESTED = (True, False, True, True, False, True)   # the client's KeyUpdates, one before each body


def _libssl():
    import ctypes
    import ctypes.util
    lib = ctypes.CDLL(ctypes.util.find_library("ssl"))   # the libssl Python's _ssl is linked with
    lib.SSL_get_fd.argtypes, lib.SSL_get_fd.restype = [ctypes.c_void_p], ctypes.c_int
    lib.SSL_key_update.argtypes, lib.SSL_key_update.restype = [ctypes.c_void_p, ctypes.c_int], ctypes.c_int
    return lib


def send_key_update(sock: ssl.SSLSocket, requested: bool) -> None:
    """OpenSSL's SSL_key_update on the socket's SSL object, which Python's ssl does not expose: the
    SSL* is the member after the weakref in CPython's PySSLSocket (checked with SSL_get_fd). OpenSSL
    sends the KeyUpdate before the next application data it writes."""
    import ctypes
    lib = _libssl()
    obj = sock._sslobj
    ptr = ctypes.c_void_p.from_address(id(obj) + 3 * ctypes.sizeof(ctypes.c_void_p)).value
    if not ptr or lib.SSL_get_fd(ptr) != sock.fileno():
        raise RuntimeError("cannot find the SSL object of this Python build's ssl socket")
    if lib.SSL_key_update(ptr, 1 if requested else 0) != 1:
        raise RuntimeError("SSL_key_update failed")


@scenario("TLS 1.3 KeyUpdate, pika to RabbitMQ's listener: before each of 6 confirmed 20000-byte publishes the "
          "client's OpenSSL sends a KeyUpdate (SSL_key_update), 4 with update_requested, which Erlang answers "
          "with a KeyUpdate of its own (update_not_requested), and 2 without; the 6 messages (384 KiB) are "
          "consumed back with the small ones (each body frame spans two TLS records).", **TLS_KW)
def tls13_key_update(ctx):
    entries = []
    keylog = keys_path(ctx)
    c, trace = client_context(keylog, min_version="TLSv1_3")
    sub = sub_expect()
    conn = pika_tls_connect(sub, c)
    sock = pika_sock(conn)
    pika_work(sub, conn, "tls13.keyupdate", bodies=KU_BODIES,
              before_body=lambda i: send_key_update(sock, KU_REQUESTED[i]))
    e = tls_entry(sock, trace, server_port=TLS_PORT, alpn_offered=["amqp"], key_logged=True,
                  client_library=pika_tls_label())
    conn.close(); sub.lib_close()
    ku = trace.key_updates()
    want_c = [1 if r else 0 for r in KU_REQUESTED]
    assert ku["requested"]["C>S"] == want_c, ku
    assert ku["requested"]["S>C"] == [0] * sum(KU_REQUESTED), ku
    e["key_updates"] = {"C>S": len(KU_REQUESTED), "S>C": sum(KU_REQUESTED)}
    record(ctx, entries, sub.to_dict(), finish_entry(e, sub))
    ctx.exp.note(PIKA_NOTE + f" Besides, 6 more confirmed publishes of {KU_BODIES[0]} bytes each (bytes 'A'..'F'), "
                 f"all 10 delivered and acked.")
    conn_notes(ctx, entries)
    labels = key_log_labels(keylog).get(e["_extra"]["client_random"], [])
    n_c, n_s = labels.count("CLIENT_TRAFFIC_SECRET_N"), labels.count("SERVER_TRAFFIC_SECRET_N")
    ctx.exp.note(f"KeyUpdates by construction: the client called SSL_key_update before each {KU_BODIES[0]}-byte publish "
                 f"with request_update {want_c} (1 = update_requested), so it wrote {len(KU_REQUESTED)} KeyUpdates, "
                 f"each just before that publish's records; Erlang answers each update_requested with one KeyUpdate "
                 f"(update_not_requested), {sum(KU_REQUESTED)} in all, and only updates its read key on the others "
                 f"(the client's handshake trace read exactly those). After each KeyUpdate the sender's traffic "
                 f"secret is the next one, HKDF-Expand-Label(secret, 'traffic upd', '', hash length). The key log "
                 f"has them too: OpenSSL {ssl.OPENSSL_VERSION.split()[1]} wrote a line labelled CLIENT_TRAFFIC_SECRET_N "
                 f"(literally N) for each of its own updates ({n_c}) and SERVER_TRAFFIC_SECRET_N for each of the "
                 f"server's ({n_s}), in the order the keys changed, after the five usual lines; these labels are "
                 f"not in the NSS format's list and tshark ignores them (it derives the next secrets itself). Not used: Erlang's own key_update_at listener option. With it "
                 f"(32768) on OTP 25.2.3 the first server-initiated KeyUpdate made RabbitMQ close the connection "
                 f"with 541 INTERNAL_ERROR (its writer got a second reply to its ssl:send, "
                 f"{{writer,message_not_understood,{{Ref,ok}}}}: tls_sender replies once for the KeyUpdate and "
                 f"once for the data), so a server-initiated KeyUpdate cannot be recorded with this broker.")
    done(ctx, entries)


@scenario("TLS 1.3 HelloRetryRequest: RabbitMQ's listener restarted with supported_groups [secp256r1] only; "
          "pika's OpenSSL sends a key share for X25519 only, the server answers with a HelloRetryRequest for "
          "secp256r1 and the client sends a second ClientHello; then a second connection whose client offers "
          "P-256 first (OPENSSL_CONF Groups = P-256:X25519) needs no retry.",
          tls_options={"supported_groups": ["secp256r1"]}, **TLS_KW)
def tls13_hello_retry(ctx):
    keys, entries = keys_path(ctx), []
    sub, e = pika_connection({"keylog": str(keys), "min_version": "TLSv1_3", "queue": "tls13.hrr"})
    record(ctx, entries, sub, e)
    assert e["hello_retry"] and e["_extra"]["client_hellos"] == 2, e
    sub, e = child_connection({"keylog": str(keys), "min_version": "TLSv1_3", "queue": "tls13.nohrr"},
                              Groups="P-256:X25519")
    record(ctx, entries, sub, e)
    assert not e["hello_retry"] and e["_extra"]["client_hellos"] == 1, e
    ctx.exp.note(PIKA_NOTE)
    conn_notes(ctx, entries)
    ctx.exp.note("hello_retry is whether the first ServerHello the client read has the HelloRetryRequest random "
                 "(SHA-256 of 'HelloRetryRequest'); the client then wrote a second ClientHello on the same TCP "
                 "connection, with the same client random (RFC 8446 4.1.2), so the key log's lines for that random "
                 "hold the secrets of the handshake that followed the retry.")
    done(ctx, entries)


@scenario("TLS session resumption with a raw AMQP client on a Python ssl socket (pika cannot pass a session): "
          "TLS 1.2 by session id against RabbitMQ (Erlang's session cache), TLS 1.2 by session ticket "
          "against stunnel/OpenSSL (RFC 5077), and TLS 1.3 PSK from a NewSessionTicket against RabbitMQ and "
          "against stunnel; each a full handshake then a resumed one, each connection a real AMQP handshake, "
          "queue.declare, publish, basic.get, ack, queue.delete and closes.", **TLS_KW)
def tls_resumption(ctx):
    broker.ensure_stunnel()
    keys, entries = keys_path(ctx), []
    plan = [("tls12.sid", TLS_PORT, "TLSv1_2", "session-id"), ("tls12.ticket", STUNNEL_PORT, "TLSv1_2", "ticket"),
            ("tls13.psk.erlang", TLS_PORT, None, "psk"), ("tls13.psk.openssl", STUNNEL_PORT, None, "psk")]
    for q, port, maxv, how in plan:
        context, trace = client_context(keys, max_version=maxv, min_version=None if maxv else "TLSv1_3")
        session = None
        for attempt in (0, 1):
            trace.clear()
            sub = sub_expect()
            r = TlsRawClient(sub, context, port, session=session)
            raw_work(r, f"{q}.{attempt}")
            offered = session
            e = tls_entry(r.sock, trace, server_port=port, alpn_offered=["amqp"], key_logged=True,
                          client_library=raw_tls_label(), offered_session=offered)
            session = r.sock.session
            r.sock.close()
            record(ctx, entries, sub.to_dict(), finish_entry(e, sub))
            assert e["resumed"] == (how if attempt else None), (q, attempt, e)
    ctx.exp.note("Each raw connection: protocol header, start/start-ok (PLAIN), tune/tune-ok (heartbeat 0), "
                 "open/open-ok, channel.open 1, queue.declare, one publish, basic.get (get-ok) and basic.ack, "
                 "queue.delete, channel.close 200, connection.close 200. Each pair shares one SSLContext; the "
                 "second connection offers the first one's session (wrap_socket(session=...)). `resumed` is "
                 "session_reused of the client's socket; TLS 1.2 'ticket' when the offered session held a "
                 "ticket (OpenSSL sends it in the session_ticket extension), else 'session-id'.")
    conn_notes(ctx, entries)
    done(ctx, entries)


@scenario("Two pika TLS 1.3 connections to RabbitMQ in one capture; only the first client's SSLContext has a "
          "keylog_filename, so the key log covers the first and not the second.", **TLS_KW)
def tls_partial_keys(ctx):
    entries = []
    sub, e = pika_connection({"keylog": str(keys_path(ctx)), "min_version": "TLSv1_3", "queue": "tls.logged"})
    record(ctx, entries, sub, e)
    sub, e = pika_connection({"keylog": None, "min_version": "TLSv1_3", "queue": "tls.unlogged"})
    record(ctx, entries, sub, e)
    ctx.exp.note(PIKA_NOTE + " methods, messages, reply_codes and channels_opened count the first connection "
                 "only (the second cannot be decrypted with this key log; its own methods are in its tls entry); "
                 "connections counts both.")
    conn_notes(ctx, entries)
    done(ctx, entries)


@scenario("A plain pika connection on 5672 and a pika TLS 1.2 connection (ECDHE-RSA-AES128-GCM-SHA256) on 5671 "
          "in one capture, their steps interleaved in time: both open, then each phase on one and then the "
          "other; the TLS connection closes first.", **TLS_KW)
def tls_mixed_plain(ctx):
    import threading

    from .scenarios import pika_connect, pika_label
    keys, entries = keys_path(ctx), []
    plain, tls_sub = sub_expect(), sub_expect()
    pc = pika_connect(plain)
    pport = pc._impl._transport._sock.getsockname()[1]
    tctx, trace = client_context(keys, max_version="TLSv1_2", ciphers="ECDHE-RSA-AES128-GCM-SHA256")
    tc = pika_tls_connect(tls_sub, tctx)
    tsock = pika_sock(tc)
    # the plain connection's work runs phase by phase inside the TLS one's (one thread each, in turns)
    turn = {"plain": threading.Event(), "tls": threading.Event()}
    errors = []

    def plain_worker():
        def step():
            turn["tls"].set(); turn["plain"].wait(); turn["plain"].clear()
        try:
            turn["plain"].wait(); turn["plain"].clear()
            pika_work(plain, pc, "mixed.plain", steps=step)
        except BaseException as ex:  # noqa: BLE001
            errors.append(ex)
        finally:
            turn["tls"].set()
    t = threading.Thread(target=plain_worker)
    t.start()

    def tls_step():
        turn["plain"].set(); turn["tls"].wait(); turn["tls"].clear()
    pika_work(tls_sub, tc, "mixed.tls", steps=tls_step)
    entry = tls_entry(tsock, trace, server_port=TLS_PORT, alpn_offered=["amqp"], key_logged=True,
                      client_library=pika_tls_label())
    tc.close(); tls_sub.lib_close()
    turn["plain"].set()
    t.join(60)
    if errors:
        raise errors[0]
    pc.close(); plain.lib_close()
    pentry = finish_entry(plain_entry(pport, pika_label()), plain)
    # in the order they were opened; reply codes in the order they were sent (TLS connection closes first)
    merge(ctx.exp, tls_sub.to_dict(), True)
    merge(ctx.exp, plain.to_dict(), True)
    entries = [pentry, finish_entry(entry, tls_sub)]
    ctx.exp.note(PIKA_NOTE + " The plain connection is opened first, then the TLS one; then their "
                 "phases alternate, TLS first: TLS channel.open and queue.declare, plain channel.open and "
                 "queue.declare, TLS 2 publishes, plain 2 publishes, and so on up to queue.delete (two threads "
                 "taking turns, one waiting while the other works); then the TLS channel.close and "
                 "connection.close, then the plain channel.close and connection.close.")
    conn_notes(ctx, entries)
    done(ctx, entries)


# ------------------------------------------------------------------ Go
GO = os.environ.get("AMQPCAP_GO", "/usr/local/go/bin/go")
GO_DIR = Path(os.environ.get("AMQPCAP_RECORDER_GO", "/tmp/recgo"))
AMQP091_GO_VERSION = "v1.10.0"


def ensure_go_client() -> tuple[Path, str]:
    src = HERE / "clients" / "tls_go" / "main.go"
    exe = GO_DIR / "tlsclient"
    GO_DIR.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GOFLAGS="-mod=mod", GOPATH=str(GO_DIR / "gopath"), GOCACHE=str(GO_DIR / "cache"),
               GOTOOLCHAIN="local")
    if not (GO_DIR / "go.mod").exists():
        subprocess.run([GO, "mod", "init", "amqpcap.test/tlsclient"], cwd=GO_DIR, env=env, check=True,
                       capture_output=True)
        subprocess.run([GO, "get", f"github.com/rabbitmq/amqp091-go@{AMQP091_GO_VERSION}"], cwd=GO_DIR, env=env,
                       check=True, capture_output=True)
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        (GO_DIR / "main.go").write_text(src.read_text())
        subprocess.run([GO, "build", "-o", str(exe), "."], cwd=GO_DIR, env=env, check=True, capture_output=True)
    gov = subprocess.run([GO, "version"], capture_output=True, text=True, check=True).stdout.split()[2]
    return exe, f"amqp091-go {AMQP091_GO_VERSION} ({gov} crypto/tls)"


@scenario("The Go client (github.com/rabbitmq/amqp091-go over Go's crypto/tls, an independent TLS "
          "implementation, KeyLogWriter into the key log): one TLS 1.3 connection and one TLS 1.2 "
          "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 connection to RabbitMQ, each declaring a queue, publishing "
          "with confirms, consuming with acks, basic.get, closing.", **TLS_KW)
def tls_go_client(ctx):
    exe, label = ensure_go_client()
    keys, entries = keys_path(ctx), []
    env = dict(os.environ, AMQPCAP_HOST=HOST4, AMQPCAP_PORT=str(TLS_PORT), AMQPCAP_USER=USER,
               AMQPCAP_PASSWORD=PASSWORD, AMQPCAP_VHOST=VHOST, AMQPCAP_SNI=TLS_NAME,
               AMQPCAP_CA=str(broker.TLS_DIR / "ca.pem"), AMQPCAP_KEYLOG=str(keys))
    from cryptography import x509
    for mode in ("tls13", "tls12"):
        out = subprocess.run([str(exe), mode], env=env, capture_output=True, text=True, timeout=120)
        if out.returncode:
            raise RuntimeError(f"go client failed: {out.stderr[-2000:]}")
        seen = json.loads(out.stdout.strip().splitlines()[-1])
        sub = sub_expect()
        go_work(sub, label, seen)
        cert = x509.load_pem_x509_certificate(seen["peer_cert_pem"].encode())
        e = {"client_port": seen["client_port"], "server_port": TLS_PORT, "tls": True, "version": seen["version"],
             "cipher_suite": seen["cipher_suite"], "sni": TLS_NAME, "alpn_offered": seen["alpn_offered"],
             "alpn": seen["alpn"] or None, "encrypt_then_mac": False if seen["version"] == "TLSv1.2" else None,
             "resumed": "psk" if seen["did_resume"] and seen["version"] == "TLSv1.3" else None,
             "hello_retry": False, "key_updates": {"C>S": 0, "S>C": 0}, "key_logged": True,
             "cert_subject": cert.subject.rfc4514_string(), "cert_issuer": cert.issuer.rfc4514_string(),
             "client_library": label}
        record(ctx, entries, sub.to_dict(), finish_entry(e, sub))
    assert [e["version"] for e in entries] == ["TLSv1.3", "TLSv1.2"], entries
    assert entries[1]["cipher_suite"] == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", entries
    ctx.exp.note("Each Go connection (clients/tls_go/main.go): handshake (PLAIN, heartbeat 60 s asked), channel 1, "
                 "queue.declare, confirm.select, 3 publishes each awaited (one basic.ack each), basic.consume "
                 "with 3 deliveries each acked, basic.cancel, 1 confirmed publish, basic.get (get-ok) and ack, "
                 "basic.get (get-empty), queue.delete, channel.close 200, connection.close 200. Go's crypto/tls "
                 "does not do encrypt-then-MAC (no CBC suite here anyway), sends no KeyUpdate by itself; "
                 "hello_retry false: Go sends an X25519 key share first, which Erlang accepts. Go writes the key "
                 "log lines itself (KeyLogWriter).")
    conn_notes(ctx, entries)
    done(ctx, entries)


def go_work(sub: Expect, label: str, seen: dict) -> None:
    """What clients/tls_go/main.go does, counted; `seen` is what it reported, checked here."""
    assert seen["confirms"] == [True] * 4 and seen["deliveries"] == 3 and seen["get_ok"] == 1 and \
        seen["get_empty"] == 1, seen
    sub.lib_connect(label, USER, "PLAIN")
    sub.lib_channel()
    sub.rpc("queue.declare")
    sub.rpc("confirm.select")
    sub.c("basic.publish", 3); sub.s("basic.ack", 3)
    sub.msg("published", 3); sub.msg("confirm_acks", 3); sub.msg("confirmed_messages", 3)
    sub.rpc("basic.consume")
    sub.s("basic.deliver", 3); sub.msg("delivered", 3)
    sub.c("basic.ack", 3); sub.msg("acked", 3)
    sub.rpc("basic.cancel")
    sub.c("basic.publish"); sub.s("basic.ack"); sub.msg("published"); sub.msg("confirm_acks")
    sub.msg("confirmed_messages")
    sub.rpc("basic.get", reply="basic.get-ok"); sub.msg("get_ok")
    sub.c("basic.ack"); sub.msg("acked")
    sub.rpc("basic.get", reply="basic.get-empty"); sub.msg("get_empty")
    sub.rpc("queue.delete")
    sub.rpc("channel.close", code=200)
    sub.lib_close(200)
    sub.max_body(max(seen["body_sizes"]))


# ------------------------------------------------------------------ Node.js amqplib
@scenario("Node.js amqplib over amqps:// (Node's TLS, OpenSSL inside Node), each TLS socket's 'keylog' lines "
          "appended to the key log: one TLS 1.3 and one TLS 1.2 TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 "
          "connection to RabbitMQ, each a ConfirmChannel declaring a queue, 3 publishes each awaited, a "
          "consumer acking 3 deliveries, basic.cancel, 1 more publish, basic.get (get-ok, acked) and "
          "basic.get (get-empty), queue.delete, closes.", **TLS_KW)
def tls_node_amqplib(ctx):
    import base64

    from cryptography import x509

    from .other_clients import NODE_DIR, ensure_amqplib
    label = ensure_amqplib()
    keys, entries = keys_path(ctx), []
    env = dict(os.environ, AMQPCAP_HOST=HOST4, AMQPCAP_PORT=str(TLS_PORT), AMQPCAP_USER=USER,
               AMQPCAP_PASSWORD=PASSWORD, AMQPCAP_VHOST=VHOST, AMQPCAP_SNI=TLS_NAME,
               AMQPCAP_CA=str(broker.TLS_DIR / "ca.pem"), AMQPCAP_KEYLOG=str(keys),
               NODE_PATH=str(NODE_DIR / "node_modules"))
    openssl = subprocess.run(["node", "-p", "process.versions.openssl"], capture_output=True, text=True,
                             check=True).stdout.strip()
    label = f"{label[:-1]}, its OpenSSL {openssl})"
    for mode in ("tls13", "tls12"):
        out = subprocess.run(["node", str(HERE / "clients" / "amqplib_tls.js"), mode], env=env,
                             capture_output=True, text=True, timeout=120)
        if out.returncode:
            raise RuntimeError(f"amqplib client failed: {out.stderr[-2000:]}")
        seen = json.loads(out.stdout.strip().splitlines()[-1])
        assert (seen["confirms"], seen["deliveries"], seen["getOk"], seen["getEmpty"], seen["tls_sockets"]) == \
            (4, 3, 1, 1, 1), seen
        sub = sub_expect()
        sub.lib_connect(label, USER, "PLAIN")
        sub.lib_channel(); sub.rpc("confirm.select")          # createConfirmChannel
        sub.rpc("queue.declare")
        sub.c("basic.publish", 3); sub.s("basic.ack", 3)
        sub.msg("published", 3); sub.msg("confirm_acks", 3); sub.msg("confirmed_messages", 3)
        sub.rpc("basic.consume"); sub.s("basic.deliver", 3); sub.msg("delivered", 3)
        sub.c("basic.ack", 3); sub.msg("acked", 3)
        sub.rpc("basic.cancel")
        sub.c("basic.publish"); sub.s("basic.ack"); sub.msg("published"); sub.msg("confirm_acks")
        sub.msg("confirmed_messages")
        sub.rpc("basic.get", reply="basic.get-ok"); sub.msg("get_ok"); sub.c("basic.ack"); sub.msg("acked")
        sub.rpc("basic.get", reply="basic.get-empty"); sub.msg("get_empty")
        sub.rpc("queue.delete")
        sub.rpc("channel.close", code=200)
        sub.lib_close(200)
        sub.max_body(max(seen["sizes"]))
        cert = x509.load_der_x509_certificate(base64.b64decode(seen["peer_cert_der"]))
        e = {"client_port": seen["client_port"], "server_port": TLS_PORT, "tls": True, "version": seen["version"],
             "cipher_suite": seen["cipher_suite"], "sni": TLS_NAME, "alpn_offered": seen["alpn_offered"],
             "alpn": seen["alpn"], "encrypt_then_mac": False if seen["version"] == "TLSv1.2" else None,
             "resumed": None, "hello_retry": False, "key_updates": {"C>S": 0, "S>C": 0}, "key_logged": True,
             "cert_subject": cert.subject.rfc4514_string(), "cert_issuer": cert.issuer.rfc4514_string(),
             "client_library": label}
        assert not seen["resumed"], seen
        record(ctx, entries, sub.to_dict(), finish_entry(e, sub))
    assert [e["version"] for e in entries] == ["TLSv1.3", "TLSv1.2"], entries
    ctx.exp.note("Each amqplib connection (clients/amqplib_tls.js): handshake (PLAIN, heartbeat 0 asked, so the "
                 "server's 60 s: none in the capture), channel 1 with confirm.select, queue.declare, 3 publishes "
                 "each followed by waitForConfirms (one basic.ack each), basic.consume with 3 deliveries each "
                 "acked, basic.cancel, 1 confirmed publish, basic.get (get-ok) and ack, basic.get (get-empty), "
                 "queue.delete, channel.close 200, connection.close 200. The key log lines come from Node's "
                 "'keylog' event (the script wraps tls.connect to listen before the handshake). The TLS 1.2 "
                 "connection's encrypt_then_mac is false because the suite is AEAD (EtM applies to CBC only); "
                 "key_updates 0: Node sends none by itself. A second connection of the same script does not "
                 "resume (a new process, no session).")
    conn_notes(ctx, entries)
    done(ctx, entries)
