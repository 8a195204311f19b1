# Types for the compiled build of rpc_calls.py (Cython pure Python mode): the .py is the source.
cimport cython
from amqpcap.rules.common cimport micros, side
from amqpcap.rules.table_rows cimport RpcCallRow
from amqpcap.tables.rows cimport FrameRow


cdef tuple _CLOSES


cdef class RpcRules:
    cdef public object naming
    cdef public object emit
    cdef public int instance
    cdef public list pending
    cdef public list early

    @cython.locals(pending=RpcCallRow, answered=RpcCallRow, call=RpcCallRow, at=Py_ssize_t)
    cpdef method(self, FrameRow row, int instance)
    @cython.locals(call=RpcCallRow)
    cpdef end(self, object close_code, object close_text)
    cpdef _answer(self, RpcCallRow call, object reply, object at_ns, str outcome, object code, object text)
