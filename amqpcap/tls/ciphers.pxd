# Types for the compiled build of ciphers.py (Cython pure Python mode): the .py is the source.
cimport cython


cdef class Protection:
    cdef public int overhead

    cpdef tuple open(self, object seq, bytes header, object fragment)


cdef class Aead12(Protection):
    cdef public object aead
    cdef public bytes salt
    cdef public object iv
    cdef public int explicit
    cdef public int tag


cdef class Cbc12(Protection):
    cdef public bytes key
    cdef public bytes mac_key
    cdef public object mac
    cdef public int mac_bytes
    cdef public bint etm

    cpdef bytes _mac(self, object seq, bytes header, object data)
    cpdef bytes _decrypt(self, object iv, object ciphertext)


cdef class Aead13(Protection):
    cdef public object aead
    cdef public object iv
    cdef public int tag

    @cython.locals(inner=bytes, end=Py_ssize_t)
    cpdef tuple open(self, object seq, bytes header, object fragment)
