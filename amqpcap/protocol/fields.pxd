# Types for the compiled build of fields.py (Cython pure Python mode): the .py is the source.
cimport cython
from amqpcap.protocol.fieldtable cimport FieldTableCodec, text, timestamp

cdef extern from "Python.h":
    dict _presized "_PyDict_NewPresized" (Py_ssize_t entries)

cdef extern from *:
    """
    /* How many properties a content header's first flag word says are present (bit 0 only says
       another word follows). */
    static CYTHON_INLINE Py_ssize_t amqpcap_present(long word) { return __builtin_popcount((unsigned)word & 0xFFFEu); }
    """
    Py_ssize_t _present "amqpcap_present" (long word)

cdef bint COMPILED

cdef int OCTET, SHORT, LONG, LONGLONG, SHORTSTR, LONGSTR, TABLE, BIT, CONTENT, TIMESTAMP

@cython.locals(size=cython.Py_ssize_t, bit=cython.int, current=cython.int, code=cython.int, i=cython.Py_ssize_t,
               codes=bytes, keys=tuple, raws=bytes, width=cython.int, n=cython.Py_ssize_t, args=dict)
cpdef tuple decode_args(tuple fields, bytes payload, Py_ssize_t o, object warnings, FieldTableCodec tables)

@cython.locals(size=cython.Py_ssize_t, code=cython.int, k=cython.Py_ssize_t, mask=cython.long, flag=cython.long,
               codes=bytes, keys=tuple, width=cython.int, n=cython.Py_ssize_t, result=dict)
cpdef tuple decode_properties(tuple properties, bytes payload, Py_ssize_t o, object warnings, list flags,
                              FieldTableCodec tables)

cdef inline int _width(int code)

@cython.locals(value=cython.ulonglong, i=cython.int)
cdef object _unsigned(bytes payload, Py_ssize_t o, int width)
