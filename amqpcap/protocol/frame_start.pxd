# Types for the compiled build of frame_start.py (Cython pure Python mode): the .py is the source.
# Typed, `scan` reads the bytes with C loads and compares in C.
cimport cython

cdef bint COMPILED


cdef class FrameStart:
    cdef public bytes types
    cdef public int high
    cdef public int second
    cdef public int needed
    cdef public object pattern

    cpdef long long find(self, object buf, long long start)
    @cython.locals(view="const unsigned char[:]", types="const unsigned char[:]", high=cython.int,
                   second=cython.int, last=cython.longlong, i=cython.longlong)
    cpdef long long scan(self, object buf, long long start)
