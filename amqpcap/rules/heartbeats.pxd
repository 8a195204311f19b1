# Types for the compiled build of heartbeats.py (Cython pure Python mode): the .py is the source.
# Every frame passes here: typed, the calls into the rules and their state are C calls.
cimport cython
from amqpcap.tables.rows cimport FrameRow


cdef class _Direction:
    cdef public dict where
    cdef public long long frames
    cdef public long long heartbeats
    cdef public object last_ns
    cdef public object longest_ns
    cdef public long long long_silences
    cdef public list early
    cdef public long long late
    cdef public object late_longest_ns
    cdef public object late_first_ns
    cdef public object late_last_ns


cdef class HeartbeatRules:
    cdef public object emit
    cdef public dict directions
    cdef public object heartbeat_s
    cdef public object limit_ns
    cdef public double late_intervals
    cdef public object late_ns
    cdef public dict late

    @cython.locals(state=_Direction)
    cpdef frame(self, FrameRow row)
    cpdef _silence(self, _Direction state, object silence, object ended_ns)
