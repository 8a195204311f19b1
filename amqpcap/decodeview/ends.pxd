# Types for the compiled build of ends.py (Cython pure Python mode): the .py is the source.
# Every record passes `observe`: typed, its facts and the record's fields are C fields.
cimport cython
from amqpcap.connection.record cimport Record, as_record, new_record


cdef class _Facts:
    cdef public object version
    cdef public object last_client_ns
    cdef public Record close
    cdef public bint close_ok
    cdef public object heartbeat
    cdef public object tcp_stream


cdef class ConnectionEnds:
    cdef public dict facts
    cdef object last_connection
    cdef _Facts last_facts

    @cython.locals(facts=_Facts)
    cpdef version(self, object connection)
    @cython.locals(record=Record, facts=_Facts, message=dict, method=str, client=bint)
    cpdef observe(self, object value)
    @cython.locals(i=Py_ssize_t, out=list, record=Record)
    cpdef list apply(self, list batch, object now_ns)
    @cython.locals(record=Record, facts=_Facts, summary=dict, closing=Record, end=Record)
    cpdef end(self, object value, object now_ns)
