"""The `rpc_calls` table: synchronous requests and their replies, paired per channel.

Which methods are requests and which replies answer them comes from the spec (`<response>`).
Replies on a channel come in request order, so pending requests form a queue per channel and
direction; a reply answers the oldest pending request it can answer. A request with no-wait set
expects nothing. A channel.close (or, for the connection's channel 0, connection.close) with an
error code answers every request still pending on that channel with that error; requests still
pending when the connection closes or the capture ends have no reply. A reply seen before its
request (a capture that reordered packets) is paired when the request comes; its latency is then
negative, which is what the capture's timestamps say.
"""

from __future__ import annotations

from typing import Iterator

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from amqp_decode.spec import load_spec
from pipelines.analytics.grouped import per_group
from pipelines.schemas import RPC_CALLS

INPUT = ["date", "connection", "capture", "client", "server", "channel", "direction", "method", "ts_ns",
         "stream_offset", "no_wait", "reply_code", "reply_text", "connection_close_code",
         "connection_close_text"]
OUTPUT, OUTPUT_DDL = RPC_CALLS.task_output()
CLOSES = ("channel.close", "connection.close")


def rpc_calls(frames: DataFrame) -> DataFrame:
    closes = (frames.where(F.col("method") == "connection.close")
              .groupBy("connection").agg(F.min_by("reply_code", "ts_ns").alias("connection_close_code"),
                                         F.min_by("reply_text", "ts_ns").alias("connection_close_text")))
    methods = frames.where(F.col("kind") == "method").join(F.broadcast(closes), "connection", "left")
    return (per_group(methods.select(*INPUT), ["connection", "channel"], pair_channel, OUTPUT, OUTPUT_DDL)
            .withColumn("run_id", F.lit(None).cast("string")))


def pair_channel(rows: list[dict]) -> Iterator[dict]:
    rows.sort(key=lambda r: (r["ts_ns"], r["direction"], r["stream_offset"]))
    return _pair(rows)


def _responses() -> dict[str, tuple[str, ...]]:
    spec = load_spec("0-9-1")
    return {m.full_name: tuple(f"{m.class_name}.{r}" for r in m.responses) for m in spec.methods()
            if m.responses}


RESPONSES = _responses()
REPLIES = {reply for replies in RESPONSES.values() for reply in replies}


def _pair(rows: list[dict]) -> Iterator[dict]:
    instance = 0
    pending: list[dict] = []
    early: list[tuple[str, str, int]] = []  # replies no pending request wanted: (method, side, ts)
    for r in rows:
        method, requester = r["method"], "client" if r["direction"] == "C>S" else "server"
        if method == "channel.open":
            yield from _unanswered(pending, None)
            # a new lifetime; only its own open-ok may already have been seen (reordered capture)
            pending, early = [], [e for e in early if e[0] == "channel.open-ok"]
            instance += 1
        answered = next((p for p in pending if p["requester"] != requester
                         and method in RESPONSES[p["request"]]), None)
        if answered is not None:
            pending.remove(answered)
            yield _answer(answered, method, r["ts_ns"], "ok", None, None)
        elif method in CLOSES and (r["reply_code"] or 0) not in (0, 200):
            for call in [p for p in pending if p["requester"] != requester]:
                pending.remove(call)
                yield _answer(call, method, r["ts_ns"], "error", r["reply_code"], r["reply_text"])
        elif method in REPLIES and method not in RESPONSES:  # a reply nobody asked for (yet)
            early.append((method, requester, r["ts_ns"]))
        if method in RESPONSES and not r["no_wait"] and not (method == "basic.cancel" and requester == "server"):
            # (a broker's basic.cancel notifies; RabbitMQ expects no cancel-ok for it)
            call = {"date": r["date"], "connection": r["connection"], "capture": r["capture"],
                    "client": r["client"], "server": r["server"], "channel": r["channel"],
                    "channel_instance": instance, "requester": requester, "request": method,
                    "request_ns": r["ts_ns"]}
            reply = next((e for e in early if e[1] != requester and e[0] in RESPONSES[method]), None)
            if reply is not None:
                early.remove(reply)
                yield _answer(call, reply[0], reply[2], "ok", None, None)
            else:
                pending.append(call)
    last = rows[-1] if rows else {}
    yield from _unanswered(pending, last)


def _unanswered(pending: list[dict], last) -> Iterator[dict]:
    code = (last or {}).get("connection_close_code")
    for call in pending:
        if code not in (None, 0, 200) and call["request"] not in CLOSES:
            yield _answer(call, "connection.close", None, "error", code, last["connection_close_text"])
        else:
            yield _answer(call, None, None, "no-reply", None, None)


def _answer(call: dict, reply, at_ns, outcome: str, code, text) -> dict:
    request_ns = call.pop("request_ns")
    return {**call, "reply": reply, "request_at": request_ns // 1000,
            "reply_at": at_ns // 1000 if at_ns is not None else None,
            "latency_ms": (at_ns - request_ns) / 1e6 if at_ns is not None else None,
            "outcome": outcome, "error_code": code, "error_text": text}
