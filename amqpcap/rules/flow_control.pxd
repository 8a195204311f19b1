# Types for the compiled build of flow_control.py (Cython pure Python mode): the .py is the source.
from amqpcap.rules.common cimport arguments, micros, side, where_from
from amqpcap.tables.rows cimport FrameRow


cdef frozenset _EVENTS


cdef class FlowRules:
    cdef public object emit
    cdef public dict open

    cpdef method(self, FrameRow row)
