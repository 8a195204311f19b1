# Types for the compiled build of columns.py (Cython pure Python mode): the .py is the source.

cimport cython


cdef class ColumnBuffer:
    cdef readonly tuple names
    cdef list columns
    cdef public Py_ssize_t size

    cpdef add(self, dict row)
    cpdef add_values(self, tuple values)
    cpdef list take(self)


cdef class TableColumns:
    cdef object names_of
    cdef object full
    cdef public Py_ssize_t batch_rows
    cdef readonly dict buffers
    cdef readonly dict taps

    @cython.locals(buffer=ColumnBuffer)
    cpdef add(self, object table, dict row)
