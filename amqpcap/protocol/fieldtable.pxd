# Types for the compiled build of fieldtable.py (Cython pure Python mode): the .py is the source.
# Typed, the loops read the payload's octets and branch on a value's kind in C.
cimport cython

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.ref cimport PyObject

cdef bint COMPILED
cdef Py_ssize_t HELD_LONGEST, DECIMALS_HELD
cdef dict _DECIMALS
cdef int BOOLEAN, INT8, UINT8, INT16, UINT16, INT32, UINT32, FLOAT32, INT64, UINT64, FLOAT64
cdef int TIMESTAMP, DECIMAL, SHORTSTR, LONGSTR, BYTES, TABLE, ARRAY, VOID

@cython.locals(known=object)
cpdef str text(bytes p, Py_ssize_t o, Py_ssize_t n, bint hold=*)
cpdef bint held(str value)
cpdef object timestamp(object seconds)
cdef object _last_timestamp


cdef extern from *:
    """
    /* Strings seen lately, by their bytes: a direct-mapped table of ASCII str objects (an ASCII
       str's characters are its UTF-8 bytes, so a candidate is checked by length and memcmp, with
       no bytes kept beside it). A slot another string takes is simply overwritten: a string that
       never repeats (a message id) costs a hash and a store, one that repeats (a header key, an
       exchange) its decoding, allocation and freeing. Held for the process's life (<= 4096 short
       strings). */
    #define AMQPCAP_TEXT_SLOTS 4096  /* a power of two */
    static PyObject *amqpcap_texts[AMQPCAP_TEXT_SLOTS];

    static CYTHON_INLINE Py_ssize_t amqpcap_text_slot(const unsigned char *p, Py_ssize_t n) {
        uint64_t a = 0, b = 0, h;
        if (n >= 8) {
            memcpy(&a, p, 8);
            memcpy(&b, p + n - 8, 8);
        } else {
            Py_ssize_t i;
            for (i = 0; i < n; i++) a = (a << 8) | p[i];
        }
        h = (a * 0x9E3779B97F4A7C15ULL) ^ (b * 0xC2B2AE3D27D4EB4FULL) ^ (uint64_t)n;
        h ^= h >> 31;
        h *= 0xBF58476D1CE4E5B9ULL;
        return (Py_ssize_t)((h >> 40) & (AMQPCAP_TEXT_SLOTS - 1));
    }

    /* The string held in `slot` if it is these n bytes (borrowed), else NULL. */
    static CYTHON_INLINE PyObject *amqpcap_text_held(Py_ssize_t slot, const unsigned char *p, Py_ssize_t n) {
        PyObject *s = amqpcap_texts[slot];
        if (s != NULL && PyUnicode_GET_LENGTH(s) == n && memcmp(PyUnicode_DATA(s), p, (size_t)n) == 0)
            return s;
        return NULL;
    }

    /* Hold s in `slot` when it is ASCII (other text has other bytes than its characters). */
    static CYTHON_INLINE void amqpcap_text_hold(Py_ssize_t slot, PyObject *s) {
        PyObject *old;
        if (!PyUnicode_IS_COMPACT_ASCII(s)) return;
        old = amqpcap_texts[slot];
        Py_INCREF(s);
        amqpcap_texts[slot] = s;
        Py_XDECREF(old);
    }

    /* Whether s is the string held in its slot (s ASCII; tests ask it). */
    static CYTHON_INLINE int amqpcap_text_is_held(PyObject *s) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(s);
        if (!PyUnicode_IS_COMPACT_ASCII(s) || n == 0) return 0;
        return amqpcap_text_held(amqpcap_text_slot((const unsigned char *)PyUnicode_DATA(s), n),
                                 (const unsigned char *)PyUnicode_DATA(s), n) != NULL;
    }
    """
    Py_ssize_t amqpcap_text_slot(const unsigned char *p, Py_ssize_t n)
    bint _is_held "amqpcap_text_is_held" (str s)
    PyObject *amqpcap_text_held(Py_ssize_t slot, const unsigned char *p, Py_ssize_t n)
    void amqpcap_text_hold(Py_ssize_t slot, str s)


cdef inline object _held_text(bytes p, Py_ssize_t o, Py_ssize_t n):
    """text() of a short string, compiled: the held str when these bytes were seen lately; None
    when they are not UTF-8 (text() words them)."""
    cdef Py_ssize_t size = PyBytes_GET_SIZE(p)
    cdef const unsigned char *at
    cdef Py_ssize_t slot
    cdef PyObject *held
    cdef str s
    if o + n > size:  # cut at the payload's end, as a slice is
        n = size - o if size > o else 0
    if n <= 0:
        return ""
    at = <const unsigned char *>PyBytes_AS_STRING(p) + o
    slot = amqpcap_text_slot(at, n)
    held = amqpcap_text_held(slot, at, n)
    if held is not NULL:
        return <str>held
    try:
        s = p[o:o + n].decode("utf-8")
    except UnicodeDecodeError:
        return None
    amqpcap_text_hold(slot, s)
    return s

@cython.locals(value=cython.ulonglong, i=cython.int)
cdef object _uint(bytes p, Py_ssize_t o, int width)

@cython.locals(value=cython.ulonglong)
cdef Py_ssize_t _length(bytes p, Py_ssize_t o)

@cython.locals(value=object)
cdef object _sint(bytes p, Py_ssize_t o, int width)


cdef class FieldTableCodec:
    cdef readonly str dialect
    cdef int _depth
    cdef Py_ssize_t _next
    cdef bint _hold
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
    @cython.locals(size=cython.Py_ssize_t, width=cython.int, n=cython.Py_ssize_t, raw=object)
    cdef object _value(self, bytes p, Py_ssize_t o, int kind, object w)
    cpdef dict decode_entries(self, bytes data, object w)
