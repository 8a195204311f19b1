# Types for the compiled build of tcp.py (Cython pure Python mode): the .py is the source.
cimport cython
from amqpcap.capture.packets cimport Segment

cdef int _FIN, _SYN, _RST, _ACK
cdef long long _SEQ_MOD, _NONE, _HALF_SEQ, _RECENT_BYTES


cdef class StreamSink:
    cpdef long long earliest_pending(self, long long low)
    cpdef data(self, int direction, long long offset, bytes data, long long ts_ns, int capture, long long record)
    cpdef gap(self, int direction, long long offset, long long size, long long ts_ns)
    cpdef conflict(self, int direction, long long offset, long long size, long long ts_ns)
    cpdef end(self, str reason, long long ts_ns)


cdef class HalfStream:
    cdef public int direction
    cdef public StreamSink sink
    cdef public long long window
    cdef public long long base
    cdef public long long next
    cdef public list pending
    cdef public long long pending_bytes
    cdef public long long fin
    cdef public object recent
    cdef public object recent_starts
    cdef long long[:] recent_at
    cdef public Py_ssize_t recent_first
    cdef public Py_ssize_t recent_end
    cdef public long long recent_bytes
    cdef public long long order
    cdef public bint syn
    cdef public long long packets
    cdef public long long bytes
    cdef public long long duplicate_bytes
    cdef public int hole_acks

    @cython.locals(relative=cython.longlong)
    cpdef long long earliest_pending(self, long long low)
    cpdef long long offset(self, long long seq)
    cpdef on_syn(self, long long seq)
    @cython.locals(start=cython.longlong)
    cpdef on_segment(self, long long seq, bytes data, bint fin, long long ts_ns, int capture, long long record)
    cpdef on_ack_from_peer(self, long long ack)
    cpdef flush(self, long long ts_ns)
    @cython.locals(recent=object)
    cpdef _deliver(self, long long start, bytes data, long long ts_ns, int capture, long long record)
    @cython.locals(first=Py_ssize_t, kept=Py_ssize_t, i=Py_ssize_t, at="long long[:]")
    cdef _room(self)
    @cython.locals(start=cython.longlong)
    cpdef _drain(self)
    @cython.locals(seen=cython.longlong)
    cpdef bytes _trim(self, long long start, bytes data, long long ts_ns)
    @cython.locals(start=cython.longlong)
    cpdef _skip_to_pending(self)
    @cython.locals(end=cython.longlong, differing=cython.longlong, chunk_start=cython.longlong,
                   chunk_end=cython.longlong, lo=cython.longlong, hi=cython.longlong, at=Py_ssize_t)
    cpdef _compare(self, long long start, bytes data, long long ts_ns)


cdef class TcpConnection:
    cdef public tuple a
    cdef public tuple b
    cdef public long long first_ts_ns
    cdef public long long last_ts_ns
    cdef public tuple halves
    cdef public StreamSink sink
    cdef public object syn_from
    cdef public list fins
    cdef public bint rst
    cdef public object closed_at
    cdef public bint ended
    cdef public int first_capture
    cdef public dict streams
    cdef public int stream_capture

    cpdef end(self, str reason, long long ts_ns)
    cpdef str end_reason(self)


@cython.locals(a_port=cython.int, b_port=cython.int)
cdef inline int _direction(TcpConnection connection, Segment seg)


cdef class TcpTracker:
    cdef public object sink_factory
    cdef public long long window
    cdef public long long close_grace_ns
    cdef public dict connections
    cdef object _closing
    cdef long long _closing_since
    cdef public long long ignored_packets
    cdef public long long connections_seen
    cdef public long long ended
    cdef public object on_open
    cdef TcpConnection _last

    @cython.locals(connection=TcpConnection, half=HalfStream, other=HalfStream, flags=cython.int,
                   direction=cython.int, same_syn=cython.bint, last=TcpConnection)
    cpdef segment(self, Segment seg, int capture)
    cpdef finish(self)
    cpdef TcpConnection _open(self, Segment seg)
    cpdef _end(self, TcpConnection connection, str reason, long long ts_ns)
    @cython.locals(connection=TcpConnection)
    cpdef _expire(self, long long now_ns)
    @cython.locals(key=tuple, connection=TcpConnection)
    cpdef list each_connection(self)
