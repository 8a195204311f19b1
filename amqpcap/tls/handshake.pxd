# Types for the compiled build of handshake.py (Cython pure Python mode): the .py is the source.
# A connection's hellos are parsed once each, but a night has thousands of connections.
cimport cython


cdef class Messages:
    cdef public bytearray buf

    @cython.locals(buf=bytearray, pos=Py_ssize_t, size=Py_ssize_t, out=list)
    cpdef list feed(self, object fragment)
    cpdef Py_ssize_t pending(self)
    cpdef clear(self)


cdef class _Reader:
    cdef public bytes data
    cdef public Py_ssize_t pos
    cdef public Py_ssize_t end

    cpdef bytes take(self, Py_ssize_t n)
    @cython.locals(pos=Py_ssize_t, i=Py_ssize_t, data=bytes, value=cython.ulonglong)
    cpdef object uint(self, Py_ssize_t n)
    cpdef bytes vector(self, Py_ssize_t length_bytes)
    @cython.locals(size=Py_ssize_t, reader=_Reader)
    cpdef _Reader sub(self, Py_ssize_t length_bytes)
    cpdef Py_ssize_t left(self)


@cython.locals(block=_Reader, kind=object)
cpdef dict _extensions(_Reader reader)
@cython.locals(names=_Reader)
cpdef list _alpn(bytes data)
@cython.locals(names=_Reader)
cpdef object _server_name(bytes data)
@cython.locals(reader=_Reader, suites_data=bytes, listed=bytes, ext=dict)
cpdef object client_hello(bytes body)
@cython.locals(reader=_Reader, ext=dict)
cpdef object server_hello(bytes body)
