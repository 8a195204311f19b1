# Types for the compiled build of records.py (Cython pure Python mode): the .py is the source.
cimport cython

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize

cdef int RECORDS, SKIP, RESYNC, OPAQUE, _HEADER, _CHANGE_CIPHER_SPEC, _HANDSHAKE, _HEARTBEAT
cdef long long _MAX_RECORD, _COPIED_FRAGMENT
cdef bint COMPILED


cdef inline bytes _piece(bytes data, Py_ssize_t at, Py_ssize_t n):
    """data[at:at + n], the caller having checked it is within data (no slice object made)."""
    return PyBytes_FromStringAndSize(PyBytes_AS_STRING(data) + at, n)


@cython.locals(ctype=cython.int, length=cython.longlong)
cpdef long long plausible_header(bytes header, int version)
@cython.locals(ctype=cython.int, length=cython.longlong)
cpdef long long plausible(object buf, Py_ssize_t i, int version)


cdef class RecordReader


cdef class RecordSink:
    cpdef record(self, RecordReader reader, int ctype, bytes header, object fragment, long long start, tuple first,
                 long long ts_ns, int capture, long long record)
    cpdef lost(self, RecordReader reader, long long start, long long end, long long records, str kind, str why,
               tuple first, long long ts_ns)
    cpdef not_tls(self, RecordReader reader, long long offset, tuple first)


cdef class RecordReader:
    cdef public RecordSink sink
    cdef public int direction
    cdef public bytearray buf
    cdef public long long base
    cdef public long long end
    cdef public tuple first
    cdef public int state
    cdef public int version
    cdef public long long records
    cdef public long long skip_remaining
    cdef public long long lost_from
    cdef public tuple lost_first
    cdef public long long lost_records
    cdef public str lost_kind
    cdef public str lost_why
    cdef public long long opaque_from
    cdef public tuple opaque_first

    @cython.locals(used=Py_ssize_t, here=tuple)
    cpdef data(self, long long offset, bytes data, long long ts_ns, int capture, long long record)
    cpdef gap(self, long long offset, long long size, long long ts_ns)
    @cython.locals(pos=Py_ssize_t, size=Py_ssize_t, state=cython.int, stop=Py_ssize_t)
    cpdef Py_ssize_t _run(self, object buf, long long base, long long arrived, tuple here, bint final)
    @cython.locals(size=Py_ssize_t, end=cython.longlong, start=cython.longlong, length=cython.longlong, header=bytes,
                   whole=bytes)
    cpdef Py_ssize_t _framing(self, object buf, Py_ssize_t pos, long long base, long long arrived, tuple here)
    cpdef Py_ssize_t _skipping(self, object buf, Py_ssize_t pos, long long base, long long ts_ns)
    cpdef _end_skip(self, long long end, long long ts_ns)
    @cython.locals(size=Py_ssize_t, i=Py_ssize_t, end=cython.longlong, following=cython.longlong)
    cpdef Py_ssize_t _resyncing(self, object buf, Py_ssize_t pos, long long base, long long arrived, tuple here,
                                bint final)
    cpdef _pending(self, long long start, tuple first, long long records, str kind, str why)
    cpdef _report(self, long long end, long long ts_ns)
    cpdef long long earliest_pending(self, long long low)
