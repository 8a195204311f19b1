"""Values the decoder keeps once made (compiled: short strings by their bytes, fieldtable.pxd;
both builds: decimals by their bytes, the last timestamp): whatever was seen before, each value is
exactly what decoding its bytes afresh gives. Run by both builds (make test runs tests/protocol
interpreted too), so the reference and the compiled build are held to the same answers."""

from __future__ import annotations

import random
import struct
from decimal import Decimal

from amqpcap.protocol.codec import Codec
from amqpcap.protocol.fieldtable import FieldTableCodec, Timestamp, text, timestamp

# Past what is held (compiled, cdef constants, not importable: 64 bytes, 1,024 decimals)
LONGEST = 100
DECIMALS = 4096


def fresh(p: bytes, o: int, n: int) -> str:
    return p[o:o + n].decode("utf-8", "backslashreplace")


def test_strings_are_their_bytes_whatever_came_before():
    """Many more strings than there are slots, repeated and interleaved, so slots are shared and
    taken over; ASCII, other UTF-8, invalid UTF-8 (whose replacement is ASCII of another length),
    lengths on both sides of the longest held, and the same bytes at other offsets."""
    rng = random.Random(55)
    alphabet = [b"a", b"b", b"-", b".", b"\xc3\xa9", b"\xff", b"\\", b"x", b"8", b"0"]
    pool = [b"".join(rng.choice(alphabet) for _ in range(rng.randrange(0, LONGEST)))
            for _ in range(12_000)]
    pool += [b"\\xff", b"\xff", b"\\xc3", b"\xc3", b"x-trace-id", b"x-trace-ie", b"x-trace-id\x00"]
    for _ in range(3):
        for raw in rng.sample(pool, len(pool)):
            pad = rng.randrange(0, 4)
            payload = b"#" * pad + raw + b"#"
            assert text(payload, pad, len(raw)) == fresh(payload, pad, len(raw))


def test_a_string_cut_by_the_payloads_end_is_what_a_slice_gives():
    payload = b"\x05order"
    for n in range(0, 12):
        assert text(payload, 1, n) == fresh(payload, 1, n)
    assert text(payload, 6, 3) == "" and text(payload, 9, 3) == ""  # at or past the end
    assert text(b"exchange", 0, 8) == "exchange" and text(b"exchang", 0, 8) == "exchang"


def test_repeated_names_come_back_equal_and_typed():
    first = text(b"\x0aorders.new", 1, 10)
    again = text(b"!!orders.new", 2, 10)
    assert first == again == "orders.new" and type(again) is str


def test_decimals_are_their_bytes_across_the_held_limit():
    codec = FieldTableCodec("rabbitmq")
    rng = random.Random(7)
    for _ in range(DECIMALS):
        scale, value = rng.randrange(0, 12), rng.randrange(-2**31, 2**31)
        entry = b"\x01p" + b"D" + struct.pack(">Bi", scale, value)
        table, _ = codec.decode_table(struct.pack(">I", len(entry)) + entry, 0, [])
        expected = Decimal(value).scaleb(-scale)
        assert table["p"] == expected and str(table["p"]) == str(expected)  # 1.50 stays 1.50


def test_the_same_digits_at_another_scale_are_another_decimal():
    codec = FieldTableCodec("rabbitmq")
    tables = [codec.decode_table(struct.pack(">I", 8) + b"\x01pD" + struct.pack(">Bi", scale, 1999), 0, [])[0]
              for scale in (2, 1, 2, 0)]
    assert [str(t["p"]) for t in tables] == ["19.99", "199.9", "19.99", "1999"]


def test_timestamps_alternating_stay_right_and_typed():
    for seconds in [0, 1700000000, 1700000000, 1700000001, 0, 2**64 - 1, 1700000000]:
        value = timestamp(seconds)
        assert value == seconds and type(value) is Timestamp


def test_a_header_decoded_after_others_is_the_same_as_decoded_alone():
    """Two content headers with different properties, decoded in turn: none of the second's values
    is the first's (names and timestamps kept from one header never leak into the next)."""
    import datetime

    from pamqp import commands
    from pamqp import frame as pamqp_frame
    from pamqp.header import ContentHeader

    def header(app_id: str, when: int, headers: dict) -> bytes:
        when = datetime.datetime.fromtimestamp(when, datetime.timezone.utc)
        props = commands.Basic.Properties(app_id=app_id, message_type="t", headers=headers, timestamp=when)
        return pamqp_frame.marshal(ContentHeader(0, 1, props), 1)

    a = header("orders", 1700000000, {"x-a": "1", "x-price": Decimal("1.5")})
    b = header("orderz", 1700000001, {"x-b": "1", "x-price": Decimal("15")})
    codec, alone = Codec.for_version("0-9-1"), {}
    for name, data in (("a", a), ("b", b)):
        alone[name] = Codec.for_version("0-9-1").decode_frame(data)[0].properties
    for name, data in (("a", a), ("b", b), ("a", a), ("b", b)):
        assert codec.decode_frame(data)[0].properties == alone[name]
    assert str(alone["b"]["headers"]["x-price"]) == "15" and str(alone["a"]["headers"]["x-price"]) == "1.5"


def test_no_string_of_a_sasl_response_is_held():
    """AMQPLAIN's response is a field table holding the password: decoded, redacted, and none of
    its strings kept among the held ones (compiled; interpreted holds none). The login is kept as
    auth_user, so it is checked too: only texts decoded elsewhere may be held."""
    import amqpcap.protocol.fieldtable as fieldtable_module
    from amqpcap.protocol.fieldtable import held

    password, login = "pw-5f1e-never-held", "login-never-held"
    entries = (b"\x05LOGINS" + struct.pack(">I", len(login)) + login.encode()
               + b"\x08PASSWORDS" + struct.pack(">I", len(password)) + password.encode())
    args = (b"\x00\x00\x00\x00" + b"\x08AMQPLAIN" + struct.pack(">I", len(entries)) + entries
            + b"\x05en_US")
    payload = struct.pack(">HH", 10, 11) + args
    frame = struct.pack(">BHI", 1, 0, len(payload)) + payload + b"\xce"
    decoded = Codec.for_version("0-9-1").decode_frame(frame)[0]
    assert decoded.args["auth_user"] == login and decoded.args["response"] == "<redacted>"
    assert not held(password) and not held(login)
    if fieldtable_module.__file__.endswith(".so"):  # the same strings in an ordinary table are held: the check sees them
        table = struct.pack(">I", len(entries)) + entries
        FieldTableCodec("rabbitmq").decode_table(table, 0, [])
        assert held(password) and held(login)
