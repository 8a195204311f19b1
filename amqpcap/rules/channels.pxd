# Types for the compiled build of channels.py (Cython pure Python mode): the .py is the source.
from amqpcap.rules.common cimport arguments, micros, side, where_from
from amqpcap.tables.rows cimport FrameRow


cdef dict _COUNTED


cdef class ChannelRules:
    cdef public object emit
    cdef public dict current
    cdef public list pending_consumes

    cpdef method(self, FrameRow row, int instance)
