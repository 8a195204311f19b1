# Types for the compiled build of decoder.py (Cython pure Python mode): the .py is the source.
# SegmentDecoder is on the path of every segment: typed, its calls into reassembly are C calls.
cimport cython
from amqpcap.capture.tcp cimport TcpConnection, TcpTracker
from amqpcap.capture.packets cimport PacketParser, Segment
from amqpcap.capture.stream_index cimport FileStreams
from amqpcap.connection.record cimport Record


cdef long long BATCH_RECORDS, BATCH_NS


@cython.locals(record=Record, ended=bint, methods=Py_ssize_t, headers=Py_ssize_t, bodies=Py_ssize_t)
cpdef bint count_kinds(list records, dict counts, object stats)


cdef class SegmentDecoder:
    cdef public object settings
    cdef public object options
    cdef public dict codecs
    cdef public list capture_names
    cdef public object on_connection_end
    cdef public list out
    cdef public TcpTracker tracker

    cpdef list feed(self, Segment segment, int capture_index)
    cpdef list finish(self)
    cpdef list _take(self)
    cpdef long long earliest_pending(self, long long low)


cdef class PacketFeed:
    cdef public PacketParser parser
    cdef public SegmentDecoder segments
    cdef public dict infos
    cdef public list reported
    cdef public list streams
    cdef public long long packets
    cdef public long long tcp_segments
    cdef public long long ts_ns
    cdef public list held
    cdef public long long held_since
    cdef public long long ended

    @cython.locals(held=list, segment=Segment, streams=FileStreams, records=list)
    cpdef bint packet(self, long long ts_ns, Py_ssize_t index, long long number, int link_type, bytes data)
    cpdef list take(self)
