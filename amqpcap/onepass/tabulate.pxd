# Types for the compiled build of tabulate.py (Cython pure Python mode): the .py is the source.
cimport cython

from amqpcap.rules.connection cimport Analytics
from amqpcap.connection.record cimport Record, as_record
from amqpcap.tables.rows cimport FrameRow, MessageRow, RawRows


cdef class Tabulator:
    cdef public object emit
    cdef public RawRows rows
    cdef public Analytics analytics
    cdef public dict seq

    @cython.locals(record=Record, frame=FrameRow, message=MessageRow)
    cpdef record(self, object value)
