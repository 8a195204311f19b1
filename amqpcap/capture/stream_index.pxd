# Types for the compiled build of stream_index.py (Cython pure Python mode): the .py is the source.
cimport cython


cdef class LocalStream:
    cdef public tuple key
    cdef public int opener
    cdef public long long opener_seq
    cdef public long long first_lower
    cdef public long long first_higher
    cdef public long long last_ts
    cdef public int ended
    cdef public long long local
    cdef public long long placed
    cdef public long bucket

    cpdef long long first(self, int direction)


cdef class RangeStreams:
    cdef public list streams
    cdef public dict current
    cdef public long long count
    cdef public LocalStream last
    cdef bytes last_src
    cdef bytes last_dst
    cdef int last_sport
    cdef int last_dport
    cdef int last_direction

    @cython.locals(direction=cython.int, syn=cython.bint, stream=LocalStream)
    cpdef long long segment(self, bytes src, int sport, bytes dst, int dport, int flags, long long seq,
                            long long ts_ns)
    @cython.locals(direction=cython.int, stream=LocalStream)
    cdef tuple _lookup(self, bytes src, int sport, bytes dst, int dport, bint syn, long long seq, long long ts_ns)
    @cython.locals(stream=LocalStream)
    cpdef forget_ended(self, long long before_ns)


cpdef bint _same_opener(LocalStream stream, int direction, long long seq)


cdef class StreamIndex:
    cdef public long long count
    cdef public dict conversations

    @cython.locals(stream=LocalStream, latest=LocalStream, base=list, opener=int, direction=int)
    cpdef long long place(self, LocalStream stream)
    @cython.locals(latest=LocalStream)
    cpdef forget_ended(self, long long before_ns)


cdef class FileStreams:
    cdef public RangeStreams local
    cdef public StreamIndex index

    @cython.locals(stream=LocalStream)
    cpdef long long segment(self, bytes src, int sport, bytes dst, int dport, int flags, long long seq,
                            long long ts_ns)
    cpdef forget_ended(self, long long before_ns)
