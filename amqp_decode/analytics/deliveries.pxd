# Types for the compiled build of deliveries.py (Cython pure Python mode): the .py is the source.
from amqp_decode.analytics.common cimport micros
from amqp_decode.rows cimport FrameRow, MessageRow, message_key


cdef dict _SETTLE
cdef frozenset _RELEVANT


cdef class DeliveryRules:
    cdef public object emit
    cdef public int instance
    cdef public dict consumers
    cdef public list pending_consumes
    cdef public list pending_gets
    cdef public dict outstanding
    cdef public object last_tag
    cdef public bint in_order

    cpdef method(self, FrameRow row, int instance, MessageRow message=*)
    cpdef _close(self, object at_ns, str outcome)
    cpdef dict _delivery(self, FrameRow row, object queue, MessageRow message)
    cpdef _settled(self, dict delivery, str outcome, object at_ns, object requeue, bint multiple)
