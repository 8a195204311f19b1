# Types for the compiled build of errors.py (Cython pure Python mode): the .py is the source.
from amqpcap.rules.common cimport micros, side
from amqpcap.tables.rows cimport FrameRow


cdef tuple _CLOSES


cdef class ErrorRules:
    cdef public object naming
    cdef public object emit

    cpdef method(self, FrameRow row)
