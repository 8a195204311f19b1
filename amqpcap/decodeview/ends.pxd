# Types for the compiled build of ends.py (Cython pure Python mode): the .py is the source.
# Every record passes `observe`: typed, its facts are C fields and the record a dict read directly.
cimport cython


cdef class _Facts:
    cdef public object version
    cdef public object last_client_ns
    cdef public dict close
    cdef public bint close_ok
    cdef public object heartbeat
    cdef public object tcp_stream


cdef class ConnectionEnds:
    cdef public dict facts

    @cython.locals(facts=_Facts)
    cpdef version(self, object connection)
    @cython.locals(facts=_Facts, message=dict, method=str, client=bint)
    cpdef observe(self, dict record)
    @cython.locals(i=Py_ssize_t, out=list, record=dict)
    cpdef list apply(self, list batch, object now_ns)
    @cython.locals(facts=_Facts, summary=dict)
    cpdef end(self, dict record, object now_ns)
