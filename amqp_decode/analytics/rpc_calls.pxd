# Types for the compiled build of rpc_calls.py (Cython pure Python mode): the .py is the source.
from amqp_decode.analytics.common cimport micros, side
from amqp_decode.rows cimport FrameRow


cdef tuple _CLOSES


cdef class RpcRules:
    cdef public object naming
    cdef public object emit
    cdef public int instance
    cdef public list pending
    cdef public list early

    cpdef method(self, FrameRow row, int instance)
    cpdef _answer(self, dict call, object reply, object at_ns, str outcome, object code, object text)
