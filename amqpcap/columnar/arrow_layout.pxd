# Types for the compiled build of arrow_layout.py (Cython pure Python mode): the .py is the source.

cimport cython

cdef long long _INT32_MIN, _INT32_MAX


@cython.locals(n=Py_ssize_t, i=Py_ssize_t, nulls=Py_ssize_t, number=cython.longlong,
               longs="long long[:]", ints="int[:]", bits="unsigned char[:]")
cpdef tuple integers(list values, int width)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, nulls=Py_ssize_t, bits="unsigned char[:]",
               truths="unsigned char[:]")
cpdef tuple booleans(list values)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, j=Py_ssize_t, nulls=Py_ssize_t, end=cython.longlong,
               ends="int[:]", bits="unsigned char[:]", texts=list, text=str, data=bytes)
cpdef tuple strings(list values)
