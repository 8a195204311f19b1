"""No credential ever reaches decoded output: not in arguments, warnings, errors or reprs."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pamqp import commands
from pamqp import frame as pamqp_frame

from amqpcap.protocol.errors import DecodeError
from amqpcap.protocol.redact import REDACTED

PASSWORD = "S3cr3t-Pa55w0rd!"


def everything_visible(decoded) -> str:
    """Every rendering of a decoded frame a caller could print or store."""
    return "\n".join([repr(decoded), str(decoded.args), json.dumps(decoded.args, default=repr),
                      *(str(w) for w in decoded.warnings)])


def assert_no_secret(text: str, secret: str) -> None:
    assert secret not in text
    assert secret.encode().hex() not in text
    assert repr(secret.encode())[2:-1] not in text


def amqplain(login: str, password: str) -> bytes:
    def entry(key: str, value: str) -> bytes:
        value_bytes = value.encode()
        return bytes([len(key)]) + key.encode() + b"S" + struct.pack(">I", len(value_bytes)) + value_bytes
    return entry("LOGIN", login) + entry("PASSWORD", password)


def start_ok(mechanism: str, response: bytes | str) -> bytes:
    """Packed by hand: pamqp only takes text responses, and AMQPLAIN's is binary."""
    response = response.encode() if isinstance(response, str) else response
    properties = b"\x07productS\x00\x00\x00\x04test"
    payload = (struct.pack(">HHI", 10, 11, len(properties)) + properties
               + bytes([len(mechanism)]) + mechanism.encode()
               + struct.pack(">I", len(response)) + response + b"\x05en_US")
    return struct.pack(">BHI", 1, 0, len(payload)) + payload + b"\xce"


@pytest.mark.parametrize("mechanism, response, user", [
    ("PLAIN", f"\0amqpcap\0{PASSWORD}", "amqpcap"),
    ("PLAIN", f"admin\0amqpcap\0{PASSWORD}", "amqpcap"),  # authzid, authcid, password
    ("PLAIN", PASSWORD, None),  # malformed: no separators, so no user is guessed
    ("AMQPLAIN", amqplain("amqpcap", PASSWORD), "amqpcap"),
    ("AMQPLAIN", amqplain("amqpcap", PASSWORD)[:-3], None),  # truncated table
    ("SCRAM-SHA-256", f"n,,n=amqpcap,r={PASSWORD}", None),
    ("EXTERNAL", "CN=orders-service", "CN=orders-service"),  # an identity, not a secret
    ("EXTERNAL", f"\0amqpcap\0{PASSWORD}", None),  # misused: nothing kept
])
def test_start_ok_keeps_user_drops_password(codec, mechanism, response, user):
    decoded, _ = codec.decode_frame(start_ok(mechanism, response))
    assert decoded.args["mechanism"] == mechanism
    assert decoded.args["auth_user"] == user
    assert decoded.args["response"] == REDACTED
    assert_no_secret(everything_visible(decoded), PASSWORD)


def test_secure_ok_and_update_secret_carry_no_secret(codec):
    secure_ok = pamqp_frame.marshal(commands.Connection.SecureOk(response=f"My password is {PASSWORD}"), 0)
    decoded, _ = codec.decode_frame(secure_ok)
    assert decoded.args == {"response": REDACTED}
    update = pamqp_frame.marshal(commands.Connection.UpdateSecret(new_secret=PASSWORD, reason="token refresh"), 0)
    decoded, _ = codec.decode_frame(update)
    assert decoded.args == {"new_secret": REDACTED, "reason": "token refresh"}


def test_errors_on_a_broken_start_ok_do_not_quote_it(codec):
    data = bytearray(start_ok("PLAIN", f"\0amqpcap\0{PASSWORD}"))
    data[-7] = 0xFF  # locale length now runs past the payload
    with pytest.raises(DecodeError) as caught:
        codec.decode_frame(bytes(data))
    assert_no_secret(str(caught.value) + repr(caught.value), PASSWORD)


# A marker prefix keeps a short password from matching innocent output ("PLAI", "test"...).
@given(st.text(max_size=64).filter(lambda s: "\0" not in s).map(lambda s: "§pw§" + s),
       st.sampled_from(["PLAIN", "AMQPLAIN", "EXTERNAL", "RABBIT-CR-DEMO", "OTHER"]))
def test_no_password_ever_leaks(codec, password, mechanism):
    response = amqplain("bob", password) if mechanism == "AMQPLAIN" else f"\0bob\0{password}".encode()
    decoded, _ = codec.decode_frame(start_ok(mechanism, response))
    visible = json.dumps(decoded.args, default=repr, ensure_ascii=False) + repr(decoded)
    assert password not in visible and "§pw§" not in visible
