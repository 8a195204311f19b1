# Types for the compiled build of stream_index.py (Cython pure Python mode): the .py is the source.
cimport cython


cdef class RangeStreams:
    cdef public list streams
    cdef public dict current

    @cython.locals(direction=cython.int, syn=cython.bint, local=cython.longlong, first=list)
    cpdef long long segment(self, bytes src, int sport, bytes dst, int dport, int flags, long long seq)


cpdef bint _same_opener(list stream, int direction, long long seq)


cdef class StreamIndex:
    cdef public long long count
    cdef public dict conversations


cdef class FileStreams:
    cdef public RangeStreams local
    cdef public StreamIndex index
    cdef public list indices

    @cython.locals(local=cython.longlong)
    cpdef long long segment(self, bytes src, int sport, bytes dst, int dport, int flags, long long seq)
