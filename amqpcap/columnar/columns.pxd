# Types for the compiled build of columns.py (Cython pure Python mode): the .py is the source.

cimport cython


cdef class TypedRow:
    cpdef tuple column_values(self)


cdef class Laid:
    cdef public int kind
    cdef public Py_ssize_t rows
    cdef public object validity
    cdef public Py_ssize_t nulls
    cdef public object data


# Typed views of each column's buffers: a value goes in with a C store, no object kept.
cdef class _Typed:
    cdef public bytearray valid
    cdef unsigned char[:] bits

    cdef _grow_valid(self, Py_ssize_t capacity)
    cdef bint put(self, Py_ssize_t row, object value) except -1
    cdef grow(self, Py_ssize_t capacity)
    cdef Laid take(self, Py_ssize_t size)
    @cython.locals(n=Py_ssize_t)
    cdef clear(self, Py_ssize_t size)
    cdef tuple _validity(self, Py_ssize_t size)


cdef class _Integers(_Typed):
    cdef public int kind
    cdef public Py_ssize_t width
    cdef public object data

    cdef _bind(self, object data)
    cdef grow(self, Py_ssize_t capacity)
    cdef Laid take(self, Py_ssize_t size)


cdef class _Int64s(_Integers):
    cdef long long[:] longs

    cdef _bind(self, object data)
    cdef bint put(self, Py_ssize_t row, object value) except -1


cdef class _Int32s(_Integers):
    cdef int[:] ints

    cdef _bind(self, object data)
    cdef bint put(self, Py_ssize_t row, object value) except -1


cdef class _Bools(_Typed):
    cdef public bytearray data
    cdef unsigned char[:] truths

    cdef bint put(self, Py_ssize_t row, object value) except -1
    cdef grow(self, Py_ssize_t capacity)
    cdef Laid take(self, Py_ssize_t size)
    @cython.locals(n=Py_ssize_t)
    cdef clear(self, Py_ssize_t size)


cdef object _typed(long long kind, Py_ssize_t capacity)


cdef class ColumnBuffer:
    cdef readonly tuple names
    cdef readonly tuple kinds
    cdef list columns
    cdef public Py_ssize_t size
    cdef public Py_ssize_t bytes
    cdef Py_ssize_t capacity

    cdef list _empty(self, Py_ssize_t capacity)
    @cython.locals(typed=_Typed)
    cdef _grow(self)
    @cython.locals(typed=_Typed)
    cdef _put(self, Py_ssize_t i, Py_ssize_t size, object value)
    @cython.locals(typed=_Typed, laid=Laid)
    cdef list _to_objects(self, Py_ssize_t i, Py_ssize_t size)
    @cython.locals(size=Py_ssize_t, n=Py_ssize_t, i=Py_ssize_t, names=tuple)
    cpdef add(self, dict row)
    @cython.locals(size=Py_ssize_t, i=Py_ssize_t, n=Py_ssize_t)
    cpdef add_values(self, tuple values)
    @cython.locals(size=Py_ssize_t, capacity=Py_ssize_t, i=Py_ssize_t, typed=_Typed, taken=list, columns=list)
    cpdef list take(self)


@cython.locals(buffer=ColumnBuffer, most=Py_ssize_t, held=Py_ssize_t, total=Py_ssize_t)
cdef tuple _fullest(dict buffers, bint by_bytes)


cdef class TableColumns:
    cdef object names_of
    cdef object kinds_of
    cdef object full
    cdef public Py_ssize_t batch_rows
    cdef public Py_ssize_t held_rows
    cdef public Py_ssize_t held
    cdef readonly dict buffers
    cdef readonly dict tables

    @cython.locals(buffer=ColumnBuffer, typed=TypedRow)
    cpdef add(self, object table, object row)
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
