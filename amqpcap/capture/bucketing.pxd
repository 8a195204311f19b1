# Types for the compiled build of bucketing.py (Cython pure Python mode): the .py is the source.
cimport cython
from amqpcap.columnar.columns cimport ColumnBuffer, PartColumns
from amqpcap.capture.packets cimport PacketParser, Segment
from amqpcap.capture.stream_index cimport LocalStream, RangeStreams


cdef long long _REPORT_EVERY, _RECORD_HEADER


cpdef long bucket_of(bytes src, int sport, bytes dst, int dport, long buckets)


cdef class HeldSegments(ColumnBuffer):
    cpdef add(self, dict row)
    cpdef add_values(self, tuple values)
    cpdef list take(self)


cdef class SegmentBuckets:
    cdef public long buckets
    cdef public PartColumns parts
    cdef public PacketParser parser
    cdef public RangeStreams streams
    cdef public object earliest, latest
    cdef public bytearray seen
    cdef public long long records

    @cython.locals(parser=PacketParser, streams=RangeStreams, parts=PartColumns, local=LocalStream,
                   count=cython.longlong, read=cython.longlong, ts_ns=cython.longlong, link_type=cython.int,
                   data=bytes, record=tuple, segment=Segment, stream=cython.longlong, bucket=cython.long,
                   earliest="long long[:]", latest="long long[:]", seen="unsigned char[:]", issues=list,
                   timed=Py_ssize_t)
    cpdef read(self, object records, object report=*, object info=*)
