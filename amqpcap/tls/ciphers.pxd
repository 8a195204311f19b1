# Types for the compiled build of ciphers.py (Cython pure Python mode): the .py is the source.
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize

cdef bint COMPILED


cdef inline bytes _xor_nonce(bytes iv, long long seq):
    """A 12-byte IV XOR the sequence number, big-endian in its last 8 bytes."""
    cdef char out[12]
    cdef const char* p = PyBytes_AS_STRING(iv)
    cdef unsigned long long s = <unsigned long long>seq
    cdef int i
    for i in range(12):
        out[i] = p[i]
    for i in range(8):
        out[11 - i] = out[11 - i] ^ <char>((s >> (8 * i)) & 0xFF)
    return PyBytes_FromStringAndSize(out, 12)


cdef inline bytes _be64(long long seq):
    cdef char out[8]
    cdef unsigned long long s = <unsigned long long>seq
    cdef int i
    for i in range(8):
        out[7 - i] = <char>((s >> (8 * i)) & 0xFF)
    return PyBytes_FromStringAndSize(out, 8)


cdef extern from *:
    """
    /* A bytes object no one else holds (a cipher's fresh output) cut to its first n bytes where it
       is, as _PyBytes_Resize does before it reallocates: no copy. 0: it is shared (the empty
       bytes, say), or it would be empty (which is Python's one empty bytes): the caller slices. */
    static CYTHON_INLINE int amqpcap_cut_in_place(PyObject *b, Py_ssize_t n) {
        if (Py_REFCNT(b) != 1 || !PyBytes_CheckExact(b) || n <= 0 || n > PyBytes_GET_SIZE(b)) return 0;
        Py_SET_SIZE(b, n);
        PyBytes_AS_STRING(b)[n] = '\\0';
        return 1;
    }
    """
    bint amqpcap_cut_in_place(object b, Py_ssize_t n)


cdef inline bytes _cut(bytes data, Py_ssize_t end):
    """data[:end], in place when `data` is the caller's alone."""
    if amqpcap_cut_in_place(data, end):
        return data
    return data[:end]


cpdef bytes _nonce(bytes iv, long long seq)
cpdef bytes _seq_bytes(long long seq)


cdef class Protection:
    cdef public int overhead
    cdef public int content_type

    cpdef bytes open(self, long long seq, bytes header, object fragment)


cdef class Aead12(Protection):
    cdef public object aead
    cdef public bytes salt
    cdef public bytes iv
    cdef public int explicit
    cdef public int tag


cdef class Cbc12(Protection):
    cdef public bytes key
    cdef public bytes mac_key
    cdef public object mac
    cdef public int mac_bytes
    cdef public bint etm

    cpdef bytes _mac(self, long long seq, bytes header, object data)
    cpdef bytes _decrypt(self, object iv, object ciphertext)


cdef class Aead13(Protection):
    cdef public object aead
    cdef public object decrypt
    cdef public bytes iv
    cdef public int tag

    @cython.locals(inner=bytes, end=Py_ssize_t)
    cpdef bytes open(self, long long seq, bytes header, object fragment)
