# Types for the compiled build of rows.py (Cython pure Python mode): the .py is the source.
# Typed dicts let the row builders read records and fill rows with the dict API directly, and
# calls between them skip Python's method lookup (a few percent of a decode task's instructions).
cimport cython

cdef dict _DAYS
cdef long long _DAY_NS

cpdef object to_json(object value)
cpdef object _int64(object value)
cpdef object message_key(object connection, object direction, object stream_offset)
@cython.locals(days=cython.longlong)
cpdef object _date(long long ts_ns)


cdef class RawRows:
    cdef public object run_id

    cpdef dict _common(self, dict record, dict template)
    @cython.locals(args=dict)
    cpdef dict frame_row(self, dict record)
    @cython.locals(args=dict, message=dict, properties=dict)
    cpdef dict message_row(self, dict record)
    cpdef dict issue_row(self, dict record)
    cpdef dict stream_row(self, dict summary)
