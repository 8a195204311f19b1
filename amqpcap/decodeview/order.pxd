# Types for the compiled build of order.py (Cython pure Python mode): the .py is the source.
cimport cython
from amqpcap.connection.record cimport Record, as_record


cpdef object low_watermark(object decoder)


cdef class TimeOrder:
    cdef public object decoder
    cdef public object every
    cdef public Py_ssize_t cap
    cdef public object times
    cdef long long[:] time_at
    cdef public Py_ssize_t n_times
    cdef public list held
    cdef public Py_ssize_t start
    cdef public Py_ssize_t seq
    cdef public object last
    cdef public Py_ssize_t late
    cdef public Py_ssize_t forced
    cdef public Py_ssize_t most
    cdef public Py_ssize_t next_check
    cdef public double checked_at
    cdef public list late_times
    cdef public list late_held
    cdef public _Runs runs

    @cython.locals(held=list, seq=Py_ssize_t, top=cython.longlong, ts=cython.longlong,
                   count=Py_ssize_t, at=Py_ssize_t, record=Record, runs=_Runs)
    cpdef list feed(self, list batch, object render=*)
    cpdef list finish(self)
    cdef _time(self, long long ts)
    cpdef Py_ssize_t _interval(self)
    @cython.locals(late_times=list, end=Py_ssize_t, late_end=Py_ssize_t)
    cdef list _release_oldest(self, Py_ssize_t count)
    @cython.locals(start=Py_ssize_t, held=list, late_held=list, late_times=list, out=list,
                   at=Py_ssize_t, stop=Py_ssize_t, i=Py_ssize_t, time_at="long long[:]")
    cpdef list _release(self, Py_ssize_t end, Py_ssize_t late_end)
    cdef list _held(self, Py_ssize_t start, Py_ssize_t end)


cdef class _Runs:
    cdef object into
    cdef Py_ssize_t chunk_bytes
    cdef list chunks
    cdef list bases
    cdef bytearray chunk
    cdef Py_ssize_t base
    cdef Py_ssize_t fill
    cdef object ends
    cdef long long[:] end_at
    cdef Py_ssize_t count
    cdef Py_ssize_t head

    @cython.locals(fill=Py_ssize_t)
    cdef bint add(self, object record) except -1
    @cython.locals(low=Py_ssize_t, high=Py_ssize_t, k=Py_ssize_t, base=Py_ssize_t, stop=Py_ssize_t, out=list,
                   bases=list, chunks=list)
    cdef list views(self, Py_ssize_t start, Py_ssize_t end)
    @cython.locals(left=Py_ssize_t, drop=Py_ssize_t, bases=list, i=Py_ssize_t, end_at="long long[:]")
    cdef forget(self, Py_ssize_t end)
