# Types for the compiled build of tabulate.py (Cython pure Python mode): the .py is the source.
cimport cython

from amqp_decode.analytics.connection cimport Analytics
from amqp_decode.record cimport Record, as_record
from amqp_decode.rows cimport FrameRow, MessageRow, RawRows


cdef class Tabulator:
    cdef public object emit
    cdef public RawRows rows
    cdef public Analytics analytics
    cdef public dict seq

    @cython.locals(record=Record, frame=FrameRow, message=MessageRow)
    cpdef record(self, object value)
