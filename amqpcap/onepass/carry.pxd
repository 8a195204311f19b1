# Types for the compiled build of carry.py (Cython pure Python mode): the .py is the source.
# Every segment of a decode task enters here and every row it makes leaves here: typed, those are
# C calls.
cimport cython
from amqpcap.connection.decoder cimport SegmentDecoder
from amqpcap.tables.rows cimport TableRow
from amqpcap.onepass.tabulate cimport Tabulator


cdef class CarryingDecoder:
    cdef public object settings
    cdef public list capture_names
    cdef public object _emit
    cdef public Tabulator tabulator
    cdef public SegmentDecoder decoder
    cdef public dict saved
    cdef public list resumed
    cdef public object source
    cdef public bint provisional

    @cython.locals(typed=TableRow)
    cpdef _tagged(self, object table, object row)
    cpdef long long feed(self, object segment, int capture)
    @cython.locals(fed=cython.longlong, records=cython.longlong, segments=list, capture=int)
    cpdef long long feed_all(self, object batches, object progress=*)
