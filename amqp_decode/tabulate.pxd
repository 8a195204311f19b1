# Types for the compiled build of tabulate.py (Cython pure Python mode): the .py is the source.

from amqp_decode.analytics.connection cimport Analytics
from amqp_decode.rows cimport RawRows


cdef class Tabulator:
    cdef public object emit
    cdef public RawRows rows
    cdef public Analytics analytics
    cdef public dict seq

    cpdef record(self, dict record)
