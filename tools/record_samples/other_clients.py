"""Clients that are not Python libraries: Node.js amqplib, rabbitmq-c (Debian's amqp-tools) and Ruby's
Bunny.  Each is installed outside the repository if missing (npm into /tmp/recnode, apt for the
others) and driven as a subprocess; the client-side scripts live in clients/.  The expected facts
are written here from what each scenario does, and checked against what the client reports."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from .broker import HOST4, PASSWORD, USER, VHOST, _apt_install
from .scenarios import scenario

CLIENTS = Path(__file__).resolve().parent / "clients"
NODE_DIR = Path(os.environ.get("AMQPCAP_RECORDER_NODE", "/tmp/recnode"))
AMQPLIB_VERSION = "2.3.1"          # pinned; npm install amqplib@2.3.1 into NODE_DIR
AUTHFILE = Path("/tmp/amqpcap-authfile")


def _client_env() -> dict:
    return dict(os.environ, AMQPCAP_HOST=HOST4, AMQPCAP_USER=USER, AMQPCAP_PASSWORD=PASSWORD,
                AMQPCAP_VHOST=VHOST)


def _run_json(cmd, env) -> dict:
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    if out.returncode:
        raise RuntimeError(f"{cmd[0]} failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ Node.js amqplib
def ensure_amqplib() -> str:
    pkg = NODE_DIR / "node_modules" / "amqplib" / "package.json"
    if not pkg.exists() or json.loads(pkg.read_text())["version"] != AMQPLIB_VERSION:
        if shutil.which("npm") is None:
            _apt_install("nodejs", "npm")
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund",
                        "--no-save", f"amqplib@{AMQPLIB_VERSION}"], check=True, capture_output=True)
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    return f"amqplib {AMQPLIB_VERSION} (Node.js {node})"


@scenario("Node.js amqplib (promise API): a ConfirmChannel declares a direct exchange, a second channel "
          "declares an exclusive queue, binds it and sets prefetch 3; 6 mandatory publishes and 1 "
          "unroutable mandatory publish (basic.return 312 before its basic.ack), each followed by "
          "waitForConfirms; the consumer acks, nacks with requeue (then acks the redelivery), rejects, "
          "holds one message and settles it with an allUpTo (multiple) ack, nacks without requeue; "
          "basic.cancel, then basic.get (get-ok, acked) and basic.get (get-empty), exchange.delete, "
          "channel and connection close.")
def amqplib_node(ctx):
    exp = ctx.exp
    label = ensure_amqplib()
    seen = _run_json(["node", str(CLIENTS / "amqplib_scenario.js")],
                     dict(_client_env(), NODE_PATH=str(NODE_DIR / "node_modules")))
    # what the client saw must be what the scenario was written to cause
    assert seen["returns"] == [{"replyCode": 312, "messageId": "node-6"}], seen["returns"]
    assert [a["multiple"] for a in seen["confirmAcks"]] == [False] * 8, seen["confirmAcks"]
    actions = sorted((d["id"], d["redelivered"], d["action"]) for d in seen["deliveries"])
    assert actions == [("node-0", False, "ack"), ("node-1", False, "nack-requeue"), ("node-1", True, "ack"),
                       ("node-2", False, "reject"), ("node-3", False, "hold"), ("node-4", False, "ack-multiple"),
                       ("node-5", False, "nack")], actions
    assert (seen["getOk"], seen["getEmpty"]) == (1, 1)

    exp.lib_connect(label, USER, "PLAIN")
    exp.lib_channel()                                   # channel 1: ConfirmChannel
    exp.rpc("confirm.select")
    exp.rpc("exchange.declare")
    exp.lib_channel()                                   # channel 2: consumer
    exp.rpc("queue.declare"); exp.rpc("queue.bind"); exp.rpc("basic.qos")
    exp.c("basic.publish", 7); exp.msg("published", 7)  # node-0..node-6, each awaited
    exp.s("basic.return"); exp.reply_code("basic.return", 312); exp.msg("returned")
    exp.s("basic.ack", 7); exp.msg("confirm_acks", 7); exp.msg("confirmed_messages", 7)
    exp.rpc("basic.consume")
    exp.s("basic.deliver", 7); exp.msg("delivered", 7); exp.msg("redelivered")
    exp.c("basic.ack", 3); exp.msg("acked", 4); exp.msg("acked_multiple_frames")  # node-0, node-1 again, node-4 (+node-3)
    exp.c("basic.nack", 2); exp.msg("nacked", 2); exp.msg("requeued")           # node-1 (requeue), node-5
    exp.c("basic.reject"); exp.msg("rejected")                                  # node-2
    exp.rpc("basic.cancel")
    exp.c("basic.publish"); exp.msg("published"); exp.s("basic.ack"); exp.msg("confirm_acks")
    exp.msg("confirmed_messages")                                               # node-7
    exp.rpc("basic.get", reply="basic.get-ok"); exp.msg("get_ok")
    exp.c("basic.ack"); exp.msg("acked")
    exp.rpc("basic.get", reply="basic.get-empty"); exp.msg("get_empty")
    exp.rpc("channel.close", code=200)                  # consumer channel
    exp.rpc("exchange.delete")
    exp.rpc("channel.close", code=200)                  # ConfirmChannel
    exp.lib_close(200)
    exp.max_body(max(len(json.dumps({"n": i, "client": "amqplib"}, separators=(",", ":"))) for i in range(8)))
    exp.note("amqplib closes channels and the connection with reply-code 200 (REPLY_SUCCESS); "
             "connection.close does not close channels itself, so the scenario closes both first. Every "
             "publish is followed by waitForConfirms, so each gets its own basic.ack (multiple=0): "
             "exact. The unroutable node-6 (routing key no-such-key) gets basic.return 312 then "
             "basic.ack. Deliveries (tag: message): node-1's nack requeue=1 brings it back with "
             "redelivered=1 (acked then); node-3 is held and settled by node-4's ack with multiple=1; "
             "the delivery order of the redelivery varies, the counts do not. basic.get uses no-ack=0 "
             "and acks its message. The consumer tag is server-generated (amq.ctag-...) and varies per run. "
             "amqplib 2.x sends no heartbeat preference by default, so tune-ok takes the server's "
             "channel_max 2047 and heartbeat 60 (none in the capture); frame_max 131072 is its default. "
             "Close reply texts: channel 'Goodbye', connection 'Cheers, thanks'.")


# ------------------------------------------------------------------ rabbitmq-c (amqp-tools)
def ensure_amqp_tools() -> str:
    if shutil.which("amqp-publish") is None:
        _apt_install("amqp-tools")
    v = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "amqp-tools"], capture_output=True,
                       text=True, check=True).stdout.strip()
    return f"rabbitmq-c amqp-tools {v}"


@scenario("rabbitmq-c through Debian's amqp-tools, one connection per command: amqp-declare-queue, "
          "amqp-publish --line-buffered (3 messages from 3 stdin lines, content-type and a header), "
          "amqp-consume --count 3 (basic.qos 3, basic.consume, 3 deliveries each acked, then channel "
          "close without basic.cancel), two single amqp-publish (one persistent), amqp-get x3 (get-ok, "
          "get-ok, get-empty; no-ack) and amqp-delete-queue.")
def rabbitmq_c(ctx):
    exp = ctx.exp
    label = ensure_amqp_tools()
    AUTHFILE.write_text(f"username:{USER}\npassword:{PASSWORD}\n")  # keeps the password off the command line
    AUTHFILE.chmod(0o600)
    common = ["--server", HOST4, "--port", "5672", "--vhost", VHOST, "--authfile", str(AUTHFILE)]
    q = "amqpcap.rabbitmq-c"
    lines = [f"rabbitmq-c line {i}\n" for i in range(3)]
    singles = ["persistent body from amqp-publish -p", '{"from": "amqp-publish", "json": true}']

    def tool(name, *args, stdin=None, rc=0):
        out = subprocess.run([name, *common, *args], input=stdin, capture_output=True, text=True, timeout=60)
        assert out.returncode == rc, (name, out.returncode, out.stderr)
        exp.lib_connect(label, USER, "PLAIN")
        exp.lib_channel()
        return out.stdout

    def done():  # every tool closes channel 1 and the connection with 200 (tools/common.c)
        exp.rpc("channel.close", code=200)
        exp.lib_close(200)

    assert tool("amqp-declare-queue", "-q", q).strip() == q
    exp.rpc("queue.declare"); done()

    tool("amqp-publish", "-r", q, "-l", "-C", "text/plain", "-H", "x-client: rabbitmq-c", stdin="".join(lines))
    exp.c("basic.publish", 3); exp.msg("published", 3); done()

    got = tool("amqp-consume", "-q", q, "-c", "3", "cat")
    assert got == "".join(lines), got
    exp.rpc("basic.qos"); exp.rpc("basic.consume")
    exp.s("basic.deliver", 3); exp.msg("delivered", 3)
    exp.c("basic.ack", 3); exp.msg("acked", 3)
    done()

    tool("amqp-publish", "-r", q, "-p", "-b", singles[0])
    exp.c("basic.publish"); exp.msg("published"); done()
    tool("amqp-publish", "-r", q, "-C", "application/json", "-b", singles[1])
    exp.c("basic.publish"); exp.msg("published"); done()

    for body in singles:
        assert tool("amqp-get", "-q", q) == body
        exp.rpc("basic.get", reply="basic.get-ok"); exp.msg("get_ok"); done()
    tool("amqp-get", "-q", q, rc=2)
    exp.rpc("basic.get", reply="basic.get-empty"); exp.msg("get_empty"); done()

    assert tool("amqp-delete-queue", "-q", q).strip() == "0"
    exp.rpc("queue.delete"); done()
    exp.max_body(max(len(b.encode()) for b in lines + singles))
    exp.note("Nine connections, one per command, each: handshake (PLAIN, channel_max 0, frame_max "
             "131072, heartbeat 0 in tune-ok), channel.open 1, its work, channel.close 200, "
             "connection.close 200. amqp-publish -l sends each stdin line (newline included) as one "
             "message. amqp-consume -c 3 sets basic.qos prefetch 3 and the queue holds exactly 3 "
             "messages, so no 4th delivery can race the close; it acks each message after `cat` "
             "exits and closes the channel without basic.cancel. amqp-get uses no-ack=1 and exits 2 on "
             "get-empty. Credentials come from --authfile (not on the command line; Debian's patched "
             "0.11.0 wants the lines 'username:...' and 'password:...'). rabbitmq-c asks channel_max 0 "
             "and so takes the server's 2047 in tune-ok; its close reply-text is the code as a string "
             "('200').")


# ------------------------------------------------------------------ Ruby Bunny
def ensure_bunny() -> str:
    probe = ["ruby", "-e", 'require "bunny"; require "amq/protocol/version"; '
             'print Bunny::VERSION, " ", AMQ::Protocol::VERSION, " ", RUBY_VERSION']
    r = subprocess.run(probe, capture_output=True, text=True) if shutil.which("ruby") else None
    if r is None or r.returncode:
        _apt_install("ruby-bunny")
        r = subprocess.run(probe, capture_output=True, text=True, check=True)
    bunny, amq, ruby = r.stdout.split()
    return f"bunny {bunny} (amq-protocol {amq}, Ruby {ruby})"


@scenario("Ruby Bunny (Debian ruby-bunny): channel 1 in confirm mode declares an exclusive queue and "
          "publishes 3 messages, each followed by wait_for_confirms; channel 2 sets prefetch 2, "
          "re-declares the queue and subscribes with manual acks (one single ack, one held message "
          "settled by a multiple ack); basic.cancel; one more confirmed publish, basic.get (get-ok, "
          "acked) and basic.get (get-empty); Session#close closes both channels then the connection.")
def bunny_ruby(ctx):
    exp = ctx.exp
    label = ensure_bunny()
    seen = _run_json(["ruby", str(CLIENTS / "bunny_scenario.rb")], _client_env())
    assert seen["confirm_waits"] == [True] * 4, seen
    assert [(d["id"], d["redelivered"]) for d in seen["deliveries"]] == \
        [("bunny-0", False), ("bunny-1", False), ("bunny-2", False)], seen
    assert (seen["get_ok"], seen["get_empty"]) == (1, 1), seen

    exp.lib_connect(label, USER, "PLAIN")
    exp.lib_channel()                                   # channel 1
    exp.rpc("confirm.select"); exp.rpc("queue.declare")
    exp.c("basic.publish", 3); exp.msg("published", 3)
    exp.s("basic.ack", 3); exp.msg("confirm_acks", 3); exp.msg("confirmed_messages", 3)
    exp.lib_channel()                                   # channel 2
    exp.rpc("basic.qos"); exp.rpc("queue.declare"); exp.rpc("basic.consume")
    exp.s("basic.deliver", 3); exp.msg("delivered", 3)
    exp.c("basic.ack", 2); exp.msg("acked", 3); exp.msg("acked_multiple_frames")
    exp.rpc("basic.cancel")
    exp.c("basic.publish"); exp.msg("published"); exp.s("basic.ack"); exp.msg("confirm_acks")
    exp.msg("confirmed_messages")
    exp.rpc("basic.get", reply="basic.get-ok"); exp.msg("get_ok")
    exp.c("basic.ack"); exp.msg("acked")
    exp.rpc("basic.get", reply="basic.get-empty"); exp.msg("get_empty")
    exp.rpc("channel.close", 2, code=200)               # Session#close: every open channel, then ...
    exp.lib_close(200)                                  # ... connection.close
    exp.max_body(len(b"bunny message 0"))
    exp.note("Bunny closes channels and the connection with reply-code 200. wait_for_confirms after "
             "every publish: one basic.ack (multiple=0) each, exact. Consumer (prefetch 2): bunny-0 "
             "acked alone, bunny-1 held, bunny-2 acked with multiple=1 (settles bunny-1). The queue is "
             "declared on both channels (exclusive, same connection). Heartbeat negotiated to the "
             "server's 60 s: none in the capture. Bunny's start-ok carries locale en_GB (its default; "
             "RabbitMQ accepts it) and its basic.consume carries a client-generated consumer tag "
             "(bunny-<time>-<random>, varies per run); reply texts are 'Goodbye'.")
