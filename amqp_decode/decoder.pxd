# Types for the compiled build of decoder.py (Cython pure Python mode): the .py is the source.
# SegmentDecoder is on the path of every segment: typed, its calls into reassembly are C calls.
from amqp_decode.tcp cimport TcpTracker
from amqp_decode.packets cimport Segment


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
