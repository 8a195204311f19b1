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
