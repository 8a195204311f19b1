"""Credentials never leave the decoder.

Three fields carry secrets: connection.start-ok `response` (SASL), connection.secure-ok `response`
and RabbitMQ's connection.update-secret `new-secret`. They are compiled to stay raw bytes, and this
module replaces them before any caller sees the arguments. For start-ok the login name is kept as
`auth_user` where the mechanism defines one: PLAIN is `authzid NUL authcid NUL password` (RFC 4616),
AMQPLAIN a field table without its length prefix holding LOGIN and PASSWORD, EXTERNAL an optional
authorisation identity (not a secret; kept only when it holds no NUL, so a misused field cannot
smuggle a PLAIN-style password through). Every other mechanism keeps nothing.
"""

from __future__ import annotations

from amqpcap.protocol.fieldtable import TEXT_ERRORS, FieldTableCodec

REDACTED = "<redacted>"

SECRET_FIELDS = {
    "connection.start-ok": "response",
    "connection.secure-ok": "response",
    "connection.update-secret": "new_secret",
}


def sasl_user(mechanism: str, response: bytes, tables: FieldTableCodec) -> str | None:
    mechanism = mechanism.upper()
    if mechanism == "PLAIN":
        parts = response.split(b"\0")
        return parts[1].decode("utf-8", TEXT_ERRORS) if len(parts) == 3 else None
    if mechanism == "AMQPLAIN":
        try:
            login = tables.decode_entries(response, [])
        except Exception:  # a malformed response still must not leak: keep no user
            return None
        return login.get("LOGIN") if isinstance(login.get("LOGIN"), str) else None
    if mechanism == "EXTERNAL" and b"\0" not in response:
        return response.decode("utf-8", TEXT_ERRORS) or None
    return None


def redact(full_name: str, args: dict, tables: FieldTableCodec) -> dict:
    key = SECRET_FIELDS[full_name]
    secret = args.get(key)
    if full_name == "connection.start-ok":
        args["auth_user"] = sasl_user(args.get("mechanism", ""), secret or b"", tables)
    if key in args:
        args[key] = REDACTED
    return args
