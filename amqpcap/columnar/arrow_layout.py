"""A column of Python values laid out the way Arrow lays a column out, for pyarrow to wrap
(`pa.Array.from_buffers`) without converting value by value.

    laid = integers(values, 8)   # (validity, nulls, data) or None
    laid = booleans(values)      # (validity, nulls, data) or None
    laid = strings(values)       # (validity, nulls, offsets, data) or None

`validity` is Arrow's bitmap (bit i of byte i // 8 set: value i is not null), or None when no value
is null; `data` holds the values as machine integers (`array`), bits, or UTF-8 text with n + 1
int32 offsets into it.

Compiled, each value goes from its object into the buffers in C. A decode task's table columns
(about 3 M strings and 3 M integers and booleans per 125 MB of capture) spent 0.3 s in pyarrow's
generic conversion, which asks of every value whether it is an Arrow scalar, a date, a decimal.
Only the exact types the tables hold are laid out here: `int`, `bool`, `str` and None. Any other
value, an integer out of the width's range, text that UTF-8 cannot encode: None, and the caller
converts that column with pyarrow, which accepts it or raises as it always did. Interpreted, these
loops are slower than pyarrow's conversion: `COMPILED` tells the caller which to use.
"""

from __future__ import annotations

from array import array

# Compiled, this module is an extension file; interpreted, a .py (Cython is only a build tool: an
# install without a C compiler has no `cython` module to ask).
COMPILED = __file__.endswith((".so", ".pyd"))

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1


def integers(values: list, width: int):
    """(validity, nulls, data: array "q" for a `width` of 8, "i" for 4) of ints and Nones, or None."""
    n = len(values)
    valid = bytearray((n + 7) >> 3)
    if width == 8:
        data = array("q", bytes(8 * n))
        longs = data  # (compiled: typed views of the arrays; interpreted: the arrays)
        ints = array("i")
    elif width == 4:
        data = array("i", bytes(4 * n))
        ints = data
        longs = array("q")
    else:
        raise ValueError(f"integers of {width} bytes: 4 or 8")
    bits = valid
    nulls = 0
    try:
        for i in range(n):
            value = values[i]
            if value is None:
                nulls += 1
                continue
            if type(value) is not int:  # (bool, a subclass of int, too: Arrow refuses it)
                return None
            number = value  # (compiled: to a C long long, raising OverflowError past its range)
            if width == 8:
                longs[i] = number
            elif _INT32_MIN <= number <= _INT32_MAX:
                ints[i] = number
            else:
                return None
            bits[i >> 3] |= 1 << (i & 7)
    except OverflowError:
        return None
    return (valid if nulls else None), nulls, data


def booleans(values: list):
    """(validity, nulls, data: a bitmap of the values) of True, False and None, or None."""
    n = len(values)
    valid = bytearray((n + 7) >> 3)
    data = bytearray((n + 7) >> 3)
    bits = valid
    truths = data
    nulls = 0
    for i in range(n):
        value = values[i]
        if value is None:
            nulls += 1
            continue
        if value is True:
            truths[i >> 3] |= 1 << (i & 7)
        elif value is not False:
            return None
        bits[i >> 3] |= 1 << (i & 7)
    return (valid if nulls else None), nulls, data


def strings(values: list):
    """(validity, nulls, offsets: array "i" of n + 1, data: UTF-8 bytes) of strs and Nones, or None.
    The text is joined and encoded once: a value's offset is its length in characters while every
    value is ASCII (nearly always: names, ids, addresses), in bytes otherwise."""
    n = len(values)
    valid = bytearray((n + 7) >> 3)
    offsets = array("i", bytes(4 * (n + 1)))
    bits = valid
    ends = offsets
    texts = []
    nulls = 0
    end = 0
    for i in range(n):
        value = values[i]
        if value is None:
            nulls += 1
        elif type(value) is str:
            texts.append(value)
            end += len(value)
            bits[i >> 3] |= 1 << (i & 7)
        else:
            return None
        ends[i + 1] = end if end <= _INT32_MAX else 0  # (past int32, checked below)
    text = "".join(texts)
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate: pyarrow's conversion raises its own error
        return None
    if len(data) != len(text):  # not all ASCII: offsets in bytes
        end = 0
        j = 0
        for i in range(n):
            if bits[i >> 3] & (1 << (i & 7)):
                end += len(texts[j].encode())
                j += 1
            ends[i + 1] = end if end <= _INT32_MAX else 0
    if len(data) > _INT32_MAX:
        return None
    return (valid if nulls else None), nulls, offsets, data
