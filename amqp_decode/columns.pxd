# Types for the compiled build of columns.py (Cython pure Python mode): the .py is the source.

cdef class ColumnBuffer:
    cdef readonly tuple names
    cdef list columns
    cdef public Py_ssize_t size

    cpdef add(self, dict row)
    cpdef add_values(self, tuple values)
    cpdef list take(self)
