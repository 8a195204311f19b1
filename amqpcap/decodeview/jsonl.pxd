# Types for the compiled build of jsonl.py (Cython pure Python mode): the .py is the source.
# A line is written into the writer's buffer through a C pointer (pieces copied with memcpy,
# digits stored one by one), the record's fields read as C members.
cimport cython
from cpython.bytearray cimport PyByteArray_AS_STRING
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.long cimport PyLong_AsLongLongAndOverflow
from libc.string cimport memcpy, memmove
from amqpcap.connection.record cimport Record

cdef tuple _METHOD, _METHOD_MESSAGE, _HEADER, _BODY, _HEARTBEAT, _ISSUE, _PROTOCOL_HEADER, _CAPTURE_ISSUE
cdef tuple _CONNECTION_END, _TLS_CONNECTION_END
cdef tuple _TLS_METHOD, _TLS_METHOD_MESSAGE, _TLS_HEADER, _TLS_BODY, _TLS_HEARTBEAT, _TLS_ISSUE, _TLS_PROTOCOL_HEADER
cdef Py_ssize_t _PIECES_HELD, _COMMON_KEYS
cdef str _TO_SERVER, _TO_CLIENT
cdef long long _INT64_MIN, _INT64_MAX
cdef bytes _PAIRS
cdef bint COMPILED
cdef object _DUMPS, _NEWLINE
cdef bytes _TS, _TS_NS, _TS_LAST_NS, _CAPTURE, _PCAP_RECORD, _PCAP_RECORD_LAST, _TCP_STREAM, _CONNECTION
cdef bytes _CLIENT, _SERVER, _DIR, _CHANNEL, _KIND, _OFFSET, _SIZE, _METHOD_KEY, _CLASS_ID, _METHOD_ID
cdef bytes _PROPERTY_FLAGS, _PROPERTIES, _ARGS, _MESSAGE
cdef bytes _CLASS, _WEIGHT, _BODY_SIZE, _BODY_FRAME_SIZE, _ISSUE_KIND, _DETAIL, _BYTES_SKIPPED
cdef bytes _FILE_OFFSET, _FILE_END_OFFSET, _VERSION, _PROTOCOL_HEADER_KEY, _RAW, _NULL, _END, _TLS


cdef class LineWriter:
    cdef public bytearray buf
    cdef char* data
    cdef public Py_ssize_t capacity
    cdef public Py_ssize_t n
    cdef public dict kinds, methods, classes, to_server, to_client, undirected
    cdef object link_connection, link_client, link_server, link_direction
    cdef bytes link_piece
    cdef public object capture
    cdef public bytes capture_piece
    cdef public object float_value
    cdef public bytes float_text

    cpdef line(self, Record record)
    @cython.locals(n=Py_ssize_t)
    cpdef Py_ssize_t line_into(self, Record record, bytearray chunk, Py_ssize_t fill) except? -1
    @cython.locals(shape=tuple, nested=cython.bint, tls=cython.bint, first=Py_ssize_t, digits=Py_ssize_t, tail=bytes)
    cdef bint _write(self, Record record) except -1
    @cython.locals(piece=bytes)
    cdef bytes _piece(self, dict pieces, bytes key, object value, bytes after)
    @cython.locals(links=dict, entry=tuple, piece=bytes)
    cdef bytes _link(self, object connection, object client, object server, object direction)
    cdef bytes _line(self)
    cdef _put(self, bytes piece)
    @cython.locals(size=Py_ssize_t, n=Py_ssize_t)
    cdef _put_part(self, bytes piece, Py_ssize_t start, Py_ssize_t stop)
    @cython.locals(n=Py_ssize_t)
    cdef _put_own(self, Py_ssize_t start, Py_ssize_t size)
    cdef _grow(self, Py_ssize_t need)
    @cython.locals(signed=cython.longlong, number=cython.ulonglong, pair=Py_ssize_t, pairs="const char*",
                   n=Py_ssize_t, i=Py_ssize_t, end=Py_ssize_t, size=Py_ssize_t, data=cython.p_char)
    cdef _number(self, object value)
    @cython.locals(i=Py_ssize_t)
    cdef _numbers(self, object values)


cdef LineWriter _WRITER


cdef inline long long _int64(object value):
    """An int as a C long long; the smallest one (-2**63) when it does not fit."""
    cdef int overflow = 0
    cdef long long result = PyLong_AsLongLongAndOverflow(value, &overflow)
    return _INT64_MIN if overflow else result


cpdef Py_ssize_t json_line_into(object record, bytearray chunk, Py_ssize_t fill) except? -1
cdef Py_ssize_t _line_into(bytes line, bytearray chunk, Py_ssize_t fill) except? -1
cdef object _plain_shape(tuple shape, object tls)
