# Types for the compiled build of stream_index.py (Cython pure Python mode): the .py is the source.
cimport cython


cdef class RangeStreams:
    cdef public list streams
    cdef public dict current
    cdef public long long count
    cdef public list last
    cdef bytes last_src
    cdef bytes last_dst
    cdef int last_sport
    cdef int last_dport
    cdef int last_direction

    @cython.locals(direction=cython.int, syn=cython.bint, stream=list, first=list)
    cpdef long long segment(self, bytes src, int sport, bytes dst, int dport, int flags, long long seq,
                            long long ts_ns)
    @cython.locals(direction=cython.int, stream=list)
    cdef tuple _lookup(self, bytes src, int sport, bytes dst, int dport, bint syn, long long seq, long long ts_ns)


cpdef bint _same_opener(list stream, int direction, long long seq)


cdef class StreamIndex:
    cdef public long long count
    cdef public dict conversations


cdef class FileStreams:
    cdef public RangeStreams local
    cdef public StreamIndex index

    @cython.locals(stream=list)
    cpdef long long segment(self, bytes src, int sport, bytes dst, int dport, int flags, long long seq,
                            long long ts_ns)
