# Types for the compiled build of columns.py (Cython pure Python mode): the .py is the source.

cimport cython


cdef class ColumnBuffer:
    cdef readonly tuple names
    cdef list columns
    cdef public Py_ssize_t size
    cdef public Py_ssize_t bytes
    cdef Py_ssize_t capacity

    cdef list _empty(self, Py_ssize_t capacity)
    cdef _grow(self)
    @cython.locals(size=Py_ssize_t, n=Py_ssize_t, i=Py_ssize_t, columns=list, names=tuple)
    cpdef add(self, dict row)
    @cython.locals(size=Py_ssize_t, i=Py_ssize_t, columns=list)
    cpdef add_values(self, tuple values)
    @cython.locals(size=Py_ssize_t, column=list)
    cpdef list take(self)


@cython.locals(buffer=ColumnBuffer, most=Py_ssize_t, held=Py_ssize_t, total=Py_ssize_t)
cdef tuple _fullest(dict buffers, bint by_bytes)


cdef class TableColumns:
    cdef object names_of
    cdef object full
    cdef public Py_ssize_t batch_rows
    cdef public Py_ssize_t held_rows
    cdef public Py_ssize_t held
    cdef readonly dict buffers
    cdef readonly dict tables
    cdef readonly dict taps

    @cython.locals(buffer=ColumnBuffer)
    cpdef add(self, object table, dict row)
    @cython.locals(held=Py_ssize_t, most=Py_ssize_t)
    cdef _within_budget(self)


cdef class PartColumns:
    cdef readonly tuple names
    cdef readonly object buffer
    cdef object full
    cdef public Py_ssize_t flush_rows
    cdef public Py_ssize_t held_rows
    cdef public Py_ssize_t held_bytes
    cdef public Py_ssize_t held
    cdef public Py_ssize_t held_size
    cdef readonly dict buffers

    @cython.locals(buffer=ColumnBuffer)
    cpdef add(self, long part, tuple values, Py_ssize_t size=*)
    @cython.locals(buffer=ColumnBuffer)
    cpdef Py_ssize_t rows(self, long part)
    @cython.locals(buffer=ColumnBuffer)
    cpdef list take(self, long part)
