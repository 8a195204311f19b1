# Types for the compiled build of packets.py (Cython pure Python mode): the .py is the source.
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.string cimport memcmp

cdef bint COMPILED


cdef class Segment:
    cdef public long long ts_ns
    cdef public bytes src
    cdef public int sport
    cdef public bytes dst
    cdef public int dport
    cdef public long long seq
    cdef public long long ack
    cdef public int flags
    cdef public bytes payload
    cdef public long long record
    cdef public long long stream
    cdef public long long at
    cdef public long long size


@cython.locals(i=cython.Py_ssize_t, n=cython.Py_ssize_t, known=cython.Py_ssize_t, local=cython.int,
               segment=Segment, out=list, ts="const long long[:]", record="const long long[:]",
               seq="const long long[:]", ack="const long long[:]", stream="const int[:]", sport="const int[:]",
               dport="const int[:]", flags="const int[:]", src_end="const int[:]", dst_end="const int[:]",
               payload_end="const int[:]", src_data=bytes, dst_data=bytes, payload_data=bytes,
               at="const long long[:]", size="const int[:]", whole=cython.Py_ssize_t, start=cython.longlong,
               stop=cython.longlong, addresses=list)
cpdef list segments_from_packed(list packed, long long base, list streams, const unsigned char[:] capture=*)
cdef inline bytes _bytes_of(bytes data, Py_ssize_t start, Py_ssize_t stop)
cdef inline bytes _bytes_in(const unsigned char[:] buffer, Py_ssize_t start, Py_ssize_t stop)
@cython.locals(slot=Py_ssize_t, cached=bytes, address=bytes)
cdef inline bytes _known_address(bytes data, Py_ssize_t start, Py_ssize_t stop, list known)


cdef inline bytes _view_bytes(const unsigned char[:] buffer, Py_ssize_t start, Py_ssize_t stop):
    # (C only: the .py's _bytes_in calls it compiled; bounds checked there, and &buffer[start] checks start)
    return PyBytes_FromStringAndSize(<const char *> &buffer[start], stop - start)


cdef long long _MAX_OFFSET
cdef Py_ssize_t _ADDRESS_SLOTS


@cython.locals(i=cython.Py_ssize_t, n=cython.Py_ssize_t, segment=Segment, ts="long long[:]", record="long long[:]",
               seq="long long[:]", ack="long long[:]", at="long long[:]", size="int[:]", stream="int[:]", sport="int[:]", dport="int[:]",
               flags="int[:]", src_end="int[:]", dst_end="int[:]", payload_end="int[:]",
               src_size=cython.longlong, dst_size=cython.longlong, payload_size=cython.longlong,
               srcs=list, dsts=list, payloads=list, longs=list, ints=list, ends=list)
cpdef list packed_columns(list segments)


@cython.locals(segment=Segment, seq=cython.longlong, ack=cython.longlong, start=cython.Py_ssize_t)
cdef inline Segment _segment(long long ts_ns, bytes src, bytes dst, bytes data, Py_ssize_t tcp, Py_ssize_t end,
                             long long data_at)


cdef class PacketParser:
    cdef public object skipped
    cdef dict _fragments
    cdef int _max_fragment_sets
    cdef list _addresses

    @cython.locals(header=cython.int, tcp=cython.int, total=cython.int, end=cython.int, ip_at=cython.longlong)
    cpdef Segment parse(self, long long ts_ns, int link_type, bytes data, long long offset=*)
    cdef inline bytes _address(self, bytes data, Py_ssize_t at)
    cpdef object _link(self, int link_type, bytes data)
    cpdef object _ether_type(self, int ether_type, bytes data, int offset)
    @cython.locals(ip_at=cython.longlong)
    cpdef Segment _ipv4(self, long long ts_ns, bytes ip, long long ip_at=*)
    @cython.locals(ip_at=cython.longlong)
    cpdef Segment _ipv6(self, long long ts_ns, bytes ip, long long ip_at=*)
    cpdef Segment _tcp(self, long long ts_ns, bytes src, bytes dst, bytes tcp, long long tcp_at=*)
