# Types for the compiled build of readable.py (Cython pure Python mode): the .py is the source.
# The renderer's state as C fields and its steps as C calls: a line costs a few microseconds, and
# attribute lookups by name were a good part of them.

cimport cython
from amqpcap.connection.record cimport Record, as_record

cdef tuple _DIGITS
cdef long long _NO_SECOND

cpdef str value_text(object value)
cdef str _key(object key)
cdef str _quoted(str text)
cdef str _failing(object names, object class_id, object method_id)


cdef class Readable:
    cdef public bint frames
    cdef public object width
    cdef public object versions
    cdef long long _second
    cdef str _second_text
    cdef dict _heads
    cdef dict _naming
    cdef dict _said
    cdef dict _flags

    @cython.locals(second=cython.longlong, fraction=cython.longlong, micros=cython.longlong)
    cpdef str _time(self, long long ts_ns)
    @cython.locals(number=cython.longlong, last_number=cython.longlong)
    cpdef str _head(self, Record record)
    cpdef str _cut(self, str text)
    cpdef str _pair(self, str key, object value)
    cpdef str _pairs(self, dict values, str sep=*)
    cpdef object _names(self, Record record)
    cpdef str _args(self, Record record)
    cpdef str _message(self, dict message)
    @cython.locals(record=Record)
    cpdef object line(self, object value)
    cpdef str _end(self, Record record)
