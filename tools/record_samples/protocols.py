"""Port 5672 spoken in other protocols than AMQP 0-9-1: an AMQP 1.0 connection (rabbitmq_amqp1_0,
served on the same port) beside a 0-9-1 one, and the first bytes of HTTP, MQTT, STOMP and TLS that
RabbitMQ refuses.  expected.json gets `protocols`: one entry per TCP connection, in the order they
were opened, with the client's ephemeral port (read from its socket), the protocol and the protocol
headers / first bytes the client sent, all decided by the scenario (or, for AMQP 1.0, by the client
library's own framing as its frame trace reports it).  `methods` and the other 0-9-1 facts cover the
0-9-1 connections only: the AMQP 1.0 performatives are listed in `notes`."""
from __future__ import annotations

import json
import os
import re
import ssl
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

from . import broker
from .broker import HOST4, PASSWORD, USER, VHOST
from .hops import _port
from .raw import PROTOCOL_0_9_1, RawClient
from .scenarios import PIKA_CH, pika_channel, pika_connect, scenario

CLIENTS = Path(__file__).resolve().parent / "clients"
PROTON_VERSION = "0.40.0"   # pinned, installed on demand into the recorder venv with its build deps:
PROTON_PINS = [f"python-qpid-proton=={PROTON_VERSION}", "cffi==2.1.1", "pycparser==3.12"]
# proton's trace names the protocol headers it writes: "-> SASL" is AMQP 3 1 0 0, "-> AMQP" is 0 1 0 0
TRACE_HEADERS = {"SASL": "AMQP 3 1 0 0", "AMQP": "AMQP 0 1 0 0"}


def header_text(h: bytes) -> str:
    return "AMQP " + " ".join(str(b) for b in h[4:8])


# ------------------------------------------------------------------ AMQP 1.0 beside 0-9-1
def ensure_proton() -> str:
    """python-qpid-proton in the recorder venv (it builds its C core from the sdist: needs gcc)."""
    probe = [sys.executable, "-c", "import proton, importlib.metadata as m; print(m.version('python-qpid-proton'))"]
    r = subprocess.run(probe, capture_output=True, text=True)
    if r.returncode or r.stdout.strip() != PROTON_VERSION:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *PROTON_PINS], check=True)
    return f"python-qpid-proton {PROTON_VERSION} (AMQP 1.0)"


def run_proton(address: str) -> tuple[dict, list[tuple[str, str, str]]]:
    """Run the AMQP 1.0 client; returns what it reported and proton's own frame trace
    (PN_TRACE_FRM) as (direction "->"/"<-", name, arguments) in order: name is a performative, or
    "SASL"/"AMQP" for a protocol header.  Transfer payloads and sasl-init arguments (they hold the
    password) are dropped here; nothing of the trace is written out except counts and the facts
    asserted on it."""
    env = dict(os.environ, AMQPCAP_HOST=HOST4, AMQPCAP_USER=USER, AMQPCAP_PASSWORD=PASSWORD,
               AMQPCAP_VHOST=VHOST, PN_TRACE_FRM="1")
    out = subprocess.run([sys.executable, str(CLIENTS / "amqp10_proton.py"), address], env=env,
                         capture_output=True, text=True, timeout=60)
    if out.returncode:
        raise RuntimeError(f"proton client failed ({out.returncode})")  # stderr may hold the password
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    trace = []
    for line in out.stderr.splitlines():
        if "FRAME:" not in line:
            continue
        body = line.split("FRAME:", 1)[1].strip()
        body = body.split(" ", 1)[1] if body[:1].isdigit() else body       # drop the channel number
        if body in ("-> SASL", "<- SASL", "-> AMQP", "<- AMQP"):
            trace.append((body[:2], body[3:], ""))
        elif body.startswith(("-> @", "<- @")):
            name, _, rest = body[4:].partition("(")
            args = "" if name in ("sasl-init", "transfer") else rest.split(")", 1)[1].strip()
            trace.append((body[:2], name, args))
    return seen, trace


@scenario("One capture, two protocols on port 5672: an AMQP 1.0 connection (python-qpid-proton; SASL "
          "PLAIN, open with hostname vhost:amqpcap) whose sender link puts 3 messages on the existing "
          "queue amqp10.q (address /amq/queue/amqp10.q), then whose receiver link takes them back, "
          "closing links and connection cleanly; beside it a pika AMQP 0-9-1 connection that declares "
          "the queues first (it stays open while the AMQP 1.0 client runs), then publishes one message "
          "to its own queue and basic.gets and acks it.", manual_capture=True)
def amqp10_mixed(ctx):
    exp = ctx.exp
    broker.enable_plugins("rabbitmq_amqp1_0")
    label10 = ensure_proton()
    ctx.start_capture()

    c = pika_connect(exp)
    ch = pika_channel(exp, c)
    ch.queue_declare("amqp10.q"); exp.rpc("queue.declare")
    ch.queue_declare("mixed.091"); exp.rpc("queue.declare")
    pport = _port(c)

    seen, trace = run_proton("/amq/queue/amqp10.q")
    ids = [f"amqp10-{i}" for i in (1, 2, 3)]
    assert seen["sent"] == ids and seen["outcomes"] == ["accepted"] * 3, seen
    assert [m["id"] for m in seen["received"]] == ids, seen
    assert [m["body"] for m in seen["received"]] == [f"AMQP 1.0 message {i}" for i in (1, 2, 3)], seen
    headers = [TRACE_HEADERS[n] for d, n, _ in trace if d == "->" and n in TRACE_HEADERS]
    assert headers == ["AMQP 3 1 0 0", "AMQP 0 1 0 0"], headers
    order = [(d, n) for d, n, _ in trace]
    # proton pipelines open/begin/attach behind its AMQP header, before the broker's header arrives
    pipelined = order.index(("->", "open")) < order.index(("<-", "AMQP"))
    sent = Counter(n for d, n, _ in trace if d == "->" and n not in TRACE_HEADERS)
    received = Counter(n for d, n, _ in trace if d == "<-" and n not in TRACE_HEADERS)
    assert (sent["transfer"], received["transfer"], sent["attach"], received["attach"]) == (3, 3, 2, 2), trace
    mechs = next(re.findall(r":(\w+)", a) for d, n, a in trace if d == "<-" and n == "sasl-mechanisms")
    assert "PLAIN" in mechs and [a for d, n, a in trace if n == "sasl-outcome"] == ["[code=0x0]"], trace
    client_open = next(a for d, n, a in trace if d == "->" and n == "open")
    assert f'hostname="vhost:{VHOST}"' in client_open and "idle-time-out" not in client_open, client_open
    detaches = [a for d, n, a in trace if d == "<-" and n == "detach"]
    after_close = [n for d, n in order[order.index(("<-", "close")) + 1:] if d == "<-"]
    exp.connection(label10)
    exp.auth("PLAIN", USER)  # SASL PLAIN (not an AMQP 0-9-1 start-ok)

    body = b"AMQP 0-9-1 beside AMQP 1.0"
    ch.basic_publish("", "mixed.091", body); exp.c("basic.publish"); exp.msg("published")
    m, _p, b = ch.basic_get("mixed.091", auto_ack=False)
    assert b == body
    exp.rpc("basic.get", reply="basic.get-ok"); exp.msg("get_ok")
    ch.basic_ack(m.delivery_tag); exp.c("basic.ack"); exp.msg("acked")
    ch.close(); exp.rpc("channel.close", code=PIKA_CH)
    c.close(); exp.lib_close()
    exp.max_body(len(body))

    exp.protocols = [
        {"client_port": pport, "protocol": "amqp-0-9-1", "client_headers": [header_text(PROTOCOL_0_9_1)]},
        {"client_port": seen["port"], "protocol": "amqp-1.0", "client_headers": headers},
    ]
    if seen["port"] is None:
        del exp.protocols[1]["client_port"]
    fmt = lambda c: ", ".join(f"{k} {v}" for k, v in sorted(c.items()))  # noqa: E731
    pipelined_text = " without waiting for the broker's AMQP header (proton pipelines them)" if pipelined else ""
    after_close_text = (f"; in this recording the broker sent {', '.join(after_close)} after its close "
                        f"(a frame after close)") if after_close else ""
    exp.note(f"Connection 1 (client port {pport}) is pika, AMQP 0-9-1: `methods`, `messages`, "
             f"`reply_codes` and `channels_opened` are about it alone; it is opened first and closed "
             f"last. Connection 2 (client port {seen['port']}) is AMQP 1.0: the client sends the SASL "
             f"header AMQP 3 1 0 0, the broker answers with the same header and sasl-mechanisms "
             f"({' '.join(mechs)}), the client sends sasl-init PLAIN with user amqpcap, the "
             f"broker sasl-outcome code 0 (ok); then the client sends AMQP 0 1 0 0, open (hostname "
             f"vhost:amqpcap, no idle-time-out), begin and the sender's attach"
             f"{pipelined_text}. "
             f"Messages sent on the sender link (target /amq/queue/amqp10.q): {', '.join(ids)}, each "
             f"with message-id, subject amqpcap, content-type text/plain, application-properties "
             f"{{n: 1..3}} and an amqp-value string body 'AMQP 1.0 message N'; all accepted. The "
             f"receiver link (source /amq/queue/amqp10.q, credit 3) got the same 3, in order, and "
             f"accepted them. Frames the client's trace showed at record time, sent: {fmt(sent)}; "
             f"received: {fmt(received)} (SASL frames included, protocol headers not). How many "
             f"disposition frames there are is timing-dependent (one disposition may settle several "
             f"deliveries, first..last): the rest follows from the construction. The broker's "
             f"detaches as the client saw them: {'; '.join('detach ' + a for a in detaches)} (the one "
             f"answering the sender's detach closed=true has no closed=true itself: RabbitMQ 3.10's "
             f"plugin){after_close_text}. "
             f"The 1.0 connection has no AMQP 0-9-1 frame at all; the plugin's internal 0-9-1 "
             f"channels are direct (Erlang) connections, not on the wire. Its SASL PLAIN is why "
             f"auth_mechanisms/users name PLAIN/amqpcap for it as well.")


# ------------------------------------------------------------------ other protocols on 5672
def http_get() -> bytes:
    return (b"GET / HTTP/1.1\r\nHost: 127.0.0.1:5672\r\nUser-Agent: amqpcap-recorder\r\n"
            b"Accept: */*\r\nConnection: close\r\n\r\n")


def mqtt_connect(client_id: bytes = b"amqpcap-mqtt") -> bytes:
    """MQTT 3.1.1 CONNECT: protocol name MQTT, level 4, clean session, keep-alive 60 s, no
    username/password."""
    var = struct.pack(">H", 4) + b"MQTT" + bytes([4, 0x02]) + struct.pack(">H", 60)
    payload = struct.pack(">H", len(client_id)) + client_id
    rest = var + payload
    assert len(rest) < 128  # one-byte remaining length
    return bytes([0x10, len(rest)]) + rest


def stomp_connect() -> bytes:
    """STOMP 1.2 CONNECT frame without login/passcode."""
    return b"CONNECT\naccept-version:1.2\nhost:amqpcap\nheart-beat:0,0\n\n\x00"


def tls_client_hello() -> tuple[bytes, ssl.SSLObject, ssl.MemoryBIO]:
    """What an ssl-wrapped socket sends first: the ClientHello of Python's ssl (OpenSSL) for a
    client context without certificate checks, produced through memory BIOs so the scenario holds
    the exact bytes it puts on the wire."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_side=False)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read(), tls, incoming


def refused(exp, name: str, data: bytes) -> tuple[dict, bytes]:
    """A TCP connection that sends `data` in one write and reads until the broker closes."""
    r = RawClient(exp)
    port = r.sock.getsockname()[1]
    r.send_raw(data)
    answer, how = b"", "eof"
    r.sock.settimeout(10)
    while True:
        try:
            chunk = r.sock.recv(65536)
        except ConnectionResetError:
            how = "reset"
            break
        if not chunk:
            break
        answer += chunk
    r.sock.close()
    entry = {"client_port": port, "protocol": name, "client_first_bytes_hex": data[:8].hex(),
             "client_bytes": len(data), "broker_answer_hex": answer.hex(), "client_saw": how}
    return entry, answer


@scenario("Other protocols on the AMQP port, one TCP connection each (raw sockets, one write each): "
          "an HTTP/1.1 GET, an MQTT 3.1.1 CONNECT packet, a STOMP 1.2 CONNECT frame and a TLS "
          "ClientHello (Python ssl through memory BIOs), each answered by RabbitMQ with its AMQP 0 0 9 1 "
          "protocol header and closed; then a raw AMQP 0-9-1 client does a normal handshake and "
          "connection.close.")
def other_protocols(ctx):
    exp = ctx.exp
    protocols, answers = [], {}
    for name, data in (("http", http_get()), ("mqtt", mqtt_connect()), ("stomp", stomp_connect())):
        entry, answer = refused(exp, name, data)
        assert answer == PROTOCOL_0_9_1, (name, answer)
        protocols.append(entry); answers[name] = entry

    hello, tls, incoming = tls_client_hello()
    assert hello[:1] == b"\x16" and hello[5:6] == b"\x01", hello[:8].hex()  # handshake record, ClientHello
    entry, answer = refused(exp, "tls", hello)
    assert answer == PROTOCOL_0_9_1, answer
    incoming.write(answer)
    incoming.write_eof()
    try:
        tls.do_handshake()
        raise AssertionError("TLS handshake with the AMQP port succeeded")
    except ssl.SSLError as e:
        tls_error = f"{type(e).__name__}: {e.reason or e}"
    protocols.append(entry); answers["tls"] = entry

    r = RawClient(exp)
    port = r.sock.getsockname()[1]
    r.open(USER, PASSWORD, VHOST)      # PROTOCOL_0_9_1, start/start-ok, tune/tune-ok, open/open-ok
    r.close()                          # connection.close 200 / close-ok
    protocols.append({"client_port": port, "protocol": "amqp-0-9-1",
                      "client_first_bytes_hex": PROTOCOL_0_9_1.hex(), "client_headers": [header_text(PROTOCOL_0_9_1)]})
    exp.protocols = protocols

    def said(n):
        e = answers[n]
        return (f"{n} (port {e['client_port']}, {e['client_bytes']} bytes sent, first 8: "
                f"{e['client_first_bytes_hex']}): answer {e['broker_answer_hex']} then "
                f"{'EOF' if e['client_saw'] == 'eof' else 'connection reset'}")
    rst = ("Each of the four ends with ECONNRESET at the client after the 8 bytes: the broker "
           "consumed only the first 8 bytes, and a socket closed with unread data sends a TCP RST, "
           "not a FIN. ") if all(e["client_saw"] == "reset" for e in answers.values()) else ""
    exp.note(f"Four refused connections then one AMQP 0-9-1 connection, in that order, each opened "
             f"after the previous one was closed. Each refused client sends its bytes in one write "
             f"and reads until the broker closes; what each saw: {'; '.join(said(n) for n in answers)}. "
             f"RabbitMQ reads the first 8 bytes, does not recognise a protocol header and answers with "
             f"its own (41 4d 51 50 00 00 09 01 = AMQP 0 0 9 1), then closes; none of these "
             f"connections holds an AMQP frame. HTTP: GET / with Host, User-Agent, Accept and "
             f"Connection: close. MQTT: CONNECT, protocol level 4, clean session, keep-alive 60, "
             f"client id amqpcap-mqtt, no credentials. STOMP: CONNECT with accept-version 1.2, host "
             f"amqpcap, heart-beat 0,0, no credentials. TLS: the ClientHello of Python "
             f"{sys.version.split()[0]}'s ssl ({ssl.OPENSSL_VERSION}), no SNI; fed the broker's answer, "
             f"the handshake fails with {tls_error}. The ClientHello's random, session id and key share "
             f"change every run; its length (bytes 4-5 and 7-9) depends on the OpenSSL build. {rst}"
             f"The last "
             f"connection (raw client, port {port}) sends AMQP 0 0 9 1, completes the handshake "
             f"(PLAIN, user amqpcap, heartbeat 0) and closes with connection.close 200.")
