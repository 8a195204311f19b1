"""Where records start: plausibility of one pcap record header or pcapng block, and chains of
them. The same test finds the next record after damage (resynchronisation) and the first record
of a byte range, so a range reader starts exactly where a whole read passes.

A boundary is *accepted* at offset o when a chain of CHAIN plausible records (pcap) or blocks
(pcapng) starts there, each beginning where the previous one ends. Fewer are enough only where
there cannot be more: records (blocks) ending exactly at the end of the file (two records, or one
whose lengths agree as writers write them: origlen == caplen or caplen == snaplen), or (pcap)
records ending at a new global header (a concatenated capture). The test depends on the bytes
from o on and on the header rules only, never on what was read before: that is what makes a
range start exactly where a whole read passes. A test stricter than needed loses nothing there:
where no boundary is accepted, the range before reads on.

Why a false boundary is vanishingly unlikely:
- pcap: a random 16-byte header passes with odds of about 2**-32 (caplen <= 2**18 leaves 2**-14,
  origlen between caplen and 2**27 about 2**-6, the sub-second field about 2**-12). Payloads are
  not random, and one of their small-integer structures can pass alone (confirms.pcap holds one),
  which is why one header is never enough: each further header must sit exactly where the
  previous caplen ends (a 2**-18 coincidence for a structure of small integers) and carry a
  time within a day of its neighbour's. What remains is a payload that itself holds a capture
  file, with four whole records inside one captured packet. Runs of zeros (holes left by a crash)
  are no records (caplen = origlen = 0 is refused), and text never has a small caplen.
- pcapng: each block must repeat its 32-bit length at its end, be a multiple of 4 and at most
  MAX_BLOCK long, and carry a known (or plausible local) type.
"""

from __future__ import annotations

import re
import struct

CHAIN = 4  # records (blocks) a boundary needs ahead of it, unless the file ends first
MAX_CAPLEN = 1 << 18  # libpcap's MAXIMUM_SNAPLEN: libpcap itself refuses longer records
MAX_ORIGLEN = 1 << 27  # a packet longer than 128 MiB on the wire is no packet (wiretap's bound)
LEARN_RECORDS = 8  # pcap: records whose lengths tell whether the writer keeps origlen >= caplen
LEARN_BYTES = 1 << 16  # read ahead of the first record to learn from (up to LEARN_RECORDS fit)
DAY = 86_400  # the most a record's seconds may differ from its neighbour's in a chain
MAX_BLOCK = 1 << 24  # pcapng: a block longer than 16 MiB is damage (packets are <= MAX_CAPLEN)
PCAP_HEADER = 24
PCAP_RECORD = 16
BLOCK_HEADER = 12  # pcapng: type, length ... length

# pcap global header magic -> (byte order, nanosecond timestamps)
PCAP_MAGICS = {b"\xd4\xc3\xb2\xa1": ("<", False), b"\xa1\xb2\xc3\xd4": (">", False),
               b"\x4d\x3c\xb2\xa1": ("<", True), b"\xa1\xb2\x3c\x4d": (">", True)}
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"

SHB, IDB, PB, SPB, NRB, ISB, EPB, DSB = 0x0A0D0D0A, 1, 2, 3, 4, 5, 6, 10
CUSTOM = (0x00000BAD, 0x40000BAD)
BYTE_ORDER_MAGIC = {b"\x1a\x2b\x3c\x4d": ">", b"\x4d\x3c\x2b\x1a": "<"}

_NON_ZERO = re.compile(rb"[^\x00]")
ZEROS_8 = bytes(8)

# pcap_chain / pcapng_chain verdicts, find_*_boundary statuses
ACCEPTED, REFUSED, MORE = 1, 0, -1
FOUND, NOT_FOUND = 1, 0


class PcapRules:
    """What the records after one pcap global header look like."""

    __slots__ = ("order", "nano", "link_type", "snaplen", "version", "header", "sub_max", "scale",
                 "check_origlen")

    def __init__(self, order: str, nano: bool, link_type: int, snaplen: int, version: tuple[int, int]) -> None:
        self.order = order
        self.nano = nano
        self.link_type = link_type
        self.snaplen = snaplen
        self.version = version
        self.header = struct.Struct(order + "IIII")  # seconds, sub-second, caplen, origlen
        # One more than the largest sub-second value: some writers round 999999.6 us up to 10**6.
        self.sub_max = 1_000_000_000 if nano else 1_000_000
        self.scale = 1 if nano else 1000
        # origlen >= caplen holds for every writer seen, but a writer that breaks it would make
        # every record look damaged: learned from the file's first records (see learn_origlen).
        self.check_origlen = True

    @property
    def state(self) -> tuple:
        return ("pcap", self.order, self.nano, self.link_type)

    def plausible(self, sec: int, sub: int, caplen: int, origlen: int) -> bool:
        return (caplen <= MAX_CAPLEN and sub <= self.sub_max and origlen <= MAX_ORIGLEN
                and not (origlen < caplen and self.check_origlen) and (caplen or origlen) > 0)

    def learn_origlen(self, buf: bytes, o: int) -> None:
        """The first records after a global header are records by definition (damage aside): if
        two of the first LEARN_RECORDS (or a file's only record) have origlen below caplen (or
        zero), this writer does not keep the rule, and it is not checked. One such record is
        damage, and the rule stays: without it, a boundary search after damage can accept headers
        read 4 bytes late (seconds = microseconds, origlen = the first payload bytes) and misread
        every record after it (fuzz finding F6)."""
        unpack = self.header.unpack_from
        seen = breaks = 0
        first_sec = -1
        while seen < LEARN_RECORDS and len(buf) - o >= PCAP_RECORD:
            sec, sub, caplen, origlen = unpack(buf, o)
            if seen == 0:
                first_sec = sec
            # where damage (a wrong caplen) sends the walk into a payload, stop: what it reads
            # there is no record and must not teach the rule
            if (caplen > MAX_CAPLEN or sub > self.sub_max or origlen > MAX_ORIGLEN
                    or not (caplen or origlen) or not -DAY <= sec - first_sec <= DAY):
                break
            seen += 1
            breaks += origlen < caplen or origlen == 0
            o += PCAP_RECORD + caplen
        if breaks >= 2 or breaks == seen == 1 and o == len(buf):  # (a file of one record)
            self.check_origlen = False


def pcap_rules(buf: bytes, o: int) -> PcapRules | None:
    """The rules of the pcap global header at buf[o:o+24], or None if there is none."""
    magic = PCAP_MAGICS.get(buf[o:o + 4])
    if magic is None or len(buf) - o < PCAP_HEADER:
        return None
    order, nano = magic
    major, minor, _, _, snaplen, link = struct.unpack_from(order + "HHiIII", buf, o + 4)
    # bits 28-31 of the link type field carry the FCS length (pcap draft); the type is below
    return PcapRules(order, nano, link & 0x0FFFFFFF, snaplen, (major, minor))


def is_pcap_header(buf: bytes, o: int) -> bool:
    """A pcap global header (magic and major version 2) at buf[o]: a concatenated capture."""
    magic = PCAP_MAGICS.get(buf[o:o + 4])
    return magic is not None and len(buf) - o >= 6 and struct.unpack_from(magic[0] + "H", buf, o + 4)[0] == 2


def pcap_chain(buf: bytes, o: int, eof: bool, rules: PcapRules) -> int:
    """ACCEPTED if an accepted pcap record boundary is at buf[o] (see the module docstring),
    REFUSED if not, MORE if buf ends (before the end of the file) before that is known."""
    n = len(buf)
    unpack = rules.header.unpack_from
    count = 0
    last_sec = -1
    lengths_agree = False
    while count < CHAIN:
        if n - o < PCAP_RECORD:
            if not eof:
                return MORE
            # one record alone must also have the lengths writers give records (a payload that
            # happened to end at the end of the file would rarely have them)
            return ACCEPTED if o == n and (count >= 2 or count == 1 and lengths_agree) else REFUSED
        sec, sub, caplen, origlen = unpack(buf, o)
        if not rules.plausible(sec, sub, caplen, origlen) or (count and not -DAY <= sec - last_sec <= DAY):
            return ACCEPTED if count and is_pcap_header(buf, o) else REFUSED
        if not count:
            lengths_agree = origlen == caplen or caplen == rules.snaplen
        o += PCAP_RECORD + caplen
        if o > n:
            return MORE if not eof else REFUSED
        count += 1
        last_sec = sec
    return ACCEPTED


def find_pcap_boundary(buf: bytes, o: int, eof: bool, rules: PcapRules) -> tuple[int, int]:
    """(FOUND, index) of the first accepted boundary at or after buf[o]; (NOT_FOUND, len(buf)) if
    there is none up to the end of the file; (MORE, index) if buf must be extended from index on
    to know more."""
    n = len(buf)
    # caplen <= 2**18: its most significant byte is zero, so candidates sit before zero bytes
    msb = 11 if rules.order == "<" else 8
    unpack = rules.header.unpack_from
    while True:
        i = buf.find(b"\x00", o + msb)
        if i < 0:
            return (NOT_FOUND, n) if eof else (MORE, max(o, n - msb))
        o = i - msb
        if n - o >= PCAP_RECORD:
            sec, sub, caplen, origlen = unpack(buf, o)
            if caplen == 0 and origlen == 0:  # inside a run of zeros: jump to its end
                zeros_end = _NON_ZERO.search(buf, o)
                o = max(o + 1, (zeros_end.start() if zeros_end else n) - PCAP_RECORD + 1)
                continue
            if not rules.plausible(sec, sub, caplen, origlen):
                o += 1
                continue
        verdict = pcap_chain(buf, o, eof, rules)
        if verdict == ACCEPTED:
            return FOUND, o
        if verdict == MORE:
            return MORE, o
        o += 1


# -- pcapng ---------------------------------------------------------------------------------------

def plausible_block_type(block_type: int) -> bool:
    """The types the pcapng registry has handed out (1-10, 0x101-0x10A Hone, 0x201-0x20F Sysdig),
    custom blocks, and the first numbers of the local-use range (0x80000001: Apple's process
    information)."""
    return (0 < block_type <= 10 or 0x101 <= block_type <= 0x10A or 0x201 <= block_type <= 0x20F
            or block_type == SHB or block_type in CUSTOM or 0x80000000 < block_type < 0x80000100)


def block_length(buf: bytes, o: int, order: str, content: bool = True) -> tuple[int, str]:
    """(length, byte order) of the plausible block at buf[o], or (0, order) if there is none there.
    A length is plausible when it is a multiple of 4, 12..MAX_BLOCK, repeated at the block's end
    (when buf holds the end) and, unless `content` is False, holds what the block type needs (a
    packet's caplen fits in it). An SHB brings its own byte order."""
    n = len(buf)
    if n - o < BLOCK_HEADER:
        return 0, order
    block_type, length = struct.unpack_from(order + "II", buf, o)
    if block_type == SHB:
        order = BYTE_ORDER_MAGIC.get(buf[o + 8:o + 12], "")
        if not order or n - o < 16:
            return 0, order or "<"
        length, major = struct.unpack_from(order + "IxxxxH", buf, o + 4)
        if major != 1 or length < 28:
            return 0, order
    elif not plausible_block_type(block_type):
        return 0, order
    if length & 3 or not BLOCK_HEADER <= length <= MAX_BLOCK:
        return 0, order
    if o + length <= n and struct.unpack_from(order + "I", buf, o + length - 4)[0] != length:
        return 0, order
    if not content:
        return length, order
    if block_type == EPB or block_type == PB:
        if length < 32 or n - o >= 24 and struct.unpack_from(order + "I", buf, o + 20)[0] > length - 32:
            return 0, order
    elif block_type == IDB and length < 20 or block_type == SPB and length < 16:
        return 0, order
    return length, order


def pcapng_chain(buf: bytes, o: int, eof: bool, order: str) -> int:
    """As pcap_chain, for pcapng blocks."""
    n = len(buf)
    count = 0
    while count < CHAIN:
        if n - o < 16 and not eof:
            return MORE
        if n - o < BLOCK_HEADER:
            return ACCEPTED if o == n and count else REFUSED  # a block's length is repeated: one is enough
        length, order = block_length(buf, o, order)
        if not length:
            return REFUSED
        o += length
        if o > n:
            return MORE if not eof else REFUSED
        count += 1
    return ACCEPTED


def find_pcapng_boundary(buf: bytes, o: int, eof: bool, order: str) -> tuple[int, int]:
    """As find_pcap_boundary, for pcapng blocks."""
    n = len(buf)
    msb = 7 if order == "<" else 4  # a length <= 16 MiB has a zero most significant byte
    while True:
        i = buf.find(b"\x00", o + msb)
        if i < 0:
            return (NOT_FOUND, n) if eof else (MORE, max(o, n - msb))
        o = i - msb
        if buf[o:o + 8] == ZEROS_8:  # inside a run of zeros: jump to its end
            zeros_end = _NON_ZERO.search(buf, o)
            o = max(o + 1, (zeros_end.start() if zeros_end else n) - 7)
            continue
        verdict = pcapng_chain(buf, o, eof, order)
        if verdict == ACCEPTED:
            return FOUND, o
        if verdict == MORE:
            return MORE, o
        o += 1
