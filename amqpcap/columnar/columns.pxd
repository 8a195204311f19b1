# Types for the compiled build of columns.py (Cython pure Python mode): the .py is the source.

cimport cython
from cpython.list cimport PyList_GET_ITEM
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM

cdef bint COMPILED


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


cdef extern from *:
    """
    /* list[i] = v for a list the caller made (a column of objects): the index checked, no
       Python-level call. -1 with IndexError past its end. */
    static CYTHON_INLINE int amqpcap_list_store(PyObject *list, Py_ssize_t i, PyObject *v) {
        PyObject *old;
        if (i < 0 || i >= PyList_GET_SIZE(list)) {
            PyErr_SetString(PyExc_IndexError, "row past the column's end");
            return -1;
        }
        old = PyList_GET_ITEM(list, i);
        Py_INCREF(v);
        PyList_SET_ITEM(list, i, v);
        Py_XDECREF(old);
        return 0;
    }
    """
    int amqpcap_list_store(PyObject *column, Py_ssize_t i, PyObject *value) except -1


cdef int _no_column(Py_ssize_t i, Py_ssize_t n) except -1
cdef int _as_object(ColumnBuffer buffer, Py_ssize_t i, Py_ssize_t size, object value) except -1


# ColumnBuffer's compiled stores of a row's values (columns.py's _put and add_values): a column is a
# list or a typed column above (the buffer makes nothing else), so one that is not a list is taken
# as typed without a test; the values are read in place (no reference taken for a null).
cdef inline int _put_ref(ColumnBuffer buffer, Py_ssize_t i, Py_ssize_t size, PyObject *value) except -1:
    cdef list columns = buffer.columns
    cdef PyObject *column
    if i < 0 or i >= len(columns):
        return _no_column(i, len(columns))
    column = PyList_GET_ITEM(columns, i)
    if type(<object>column) is list:
        return amqpcap_list_store(column, size, value)
    if not (<_Typed>column).put(size, <object>value):
        return _as_object(buffer, i, size, <object>value)
    return 0


cdef inline int _put_values(ColumnBuffer buffer, tuple values, Py_ssize_t size) except -1:
    cdef Py_ssize_t i
    cdef PyObject *value
    cdef PyObject *none = <PyObject *>None
    for i in range(len(values)):
        value = PyTuple_GET_ITEM(values, i)
        if value != none:
            _put_ref(buffer, i, size, value)
    return 0


cdef inline int _put_value(ColumnBuffer buffer, Py_ssize_t i, Py_ssize_t size, object value) except -1:
    return _put_ref(buffer, i, size, <PyObject *>value)


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
