# Types for the compiled build of fieldtable.py (Cython pure Python mode): the .py is the source.
# Typed, the loops read the payload's octets and branch on a value's kind in C.
cimport cython

cdef bint COMPILED
cdef int BOOLEAN, INT8, UINT8, INT16, UINT16, INT32, UINT32, FLOAT32, INT64, UINT64, FLOAT64
cdef int TIMESTAMP, DECIMAL, SHORTSTR, LONGSTR, BYTES, TABLE, ARRAY, VOID

cdef str _text(bytes p, Py_ssize_t o, Py_ssize_t n)

@cython.locals(value=cython.ulonglong, i=cython.int)
cdef object _uint(bytes p, Py_ssize_t o, int width)

@cython.locals(value=object)
cdef object _sint(bytes p, Py_ssize_t o, int width)


cdef class FieldTableCodec:
    cdef readonly str dialect
    cdef int _depth
    cdef Py_ssize_t _next
    cdef bytes _kinds

    cpdef tuple decode_table(self, bytes p, Py_ssize_t o, object w)
    cdef tuple _table(self, bytes p, Py_ssize_t o, object w)
    @cython.locals(size=cython.Py_ssize_t, length=cython.Py_ssize_t, start=cython.Py_ssize_t,
                   end=cython.Py_ssize_t, n=cython.Py_ssize_t, tag=cython.int, kind=cython.int,
                   table=dict)
    cdef tuple _table_at(self, bytes p, Py_ssize_t o, object w)
    cdef tuple _array(self, bytes p, Py_ssize_t o, object w)
    @cython.locals(length=cython.Py_ssize_t, start=cython.Py_ssize_t, end=cython.Py_ssize_t,
                   tag=cython.int, kind=cython.int, values=list)
    cdef tuple _array_at(self, bytes p, Py_ssize_t o, object w)
    @cython.locals(size=cython.Py_ssize_t, width=cython.int, n=cython.Py_ssize_t)
    cdef object _value(self, bytes p, Py_ssize_t o, int kind, object w)
    cpdef dict decode_entries(self, bytes data, object w)
