# Types for the compiled build of fields.py (Cython pure Python mode): the .py is the source.
cimport cython
from amqpcap.protocol.fieldtable cimport FieldTableCodec

cdef int OCTET, SHORT, LONG, LONGLONG, SHORTSTR, LONGSTR, TABLE, BIT, CONTENT, TIMESTAMP

@cython.locals(size=cython.Py_ssize_t, bit=cython.int, current=cython.int, code=cython.int, raw=cython.bint,
               width=cython.int, n=cython.Py_ssize_t, args=dict)
cpdef tuple decode_args(tuple fields, bytes payload, Py_ssize_t o, object warnings, FieldTableCodec tables)

@cython.locals(size=cython.Py_ssize_t, code=cython.int, word=cython.int, mask=cython.int, flag=cython.long,
               width=cython.int, n=cython.Py_ssize_t, result=dict)
cpdef tuple decode_properties(tuple properties, bytes payload, Py_ssize_t o, object warnings, list flags,
                              FieldTableCodec tables)

cdef inline int _width(int code)

@cython.locals(value=cython.ulonglong, i=cython.int)
cdef object _unsigned(bytes payload, Py_ssize_t o, int width)

cdef str _text(bytes payload, Py_ssize_t o, Py_ssize_t n)
