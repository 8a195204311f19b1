# Types for the compiled build of connections.py (Cython pure Python mode): the .py is the source.
from amqpcap.rules.common cimport arguments, micros, side, text_of, to_int
from amqpcap.tables.rows cimport FrameRow


cdef dict _MILESTONES, _FIRST_FACTS, _COUNTS


cdef class ConnectionRules:
    cdef public object naming
    cdef public object emit
    cdef public long long frames
    cdef public dict milestones
    cdef public dict facts
    cdef public object close
    cdef public bint closed_cleanly
    cdef public object last_client_frame_ns
    cdef public object protocol_header_ns
    cdef public dict counts

    cpdef frame(self, FrameRow row)
    cpdef method(self, FrameRow row)
