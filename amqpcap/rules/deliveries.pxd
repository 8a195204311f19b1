# Types for the compiled build of deliveries.py (Cython pure Python mode): the .py is the source.
cimport cython
from amqpcap.rules.common cimport micros
from amqpcap.rules.table_rows cimport DeliveryRow
from amqpcap.tables.rows cimport FrameRow, MessageRow


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
    @cython.locals(delivery=DeliveryRow)
    cpdef end(self, object closed_ns)
    @cython.locals(delivery=DeliveryRow)
    cpdef _close(self, object at_ns, str outcome)
    @cython.locals(delivery=DeliveryRow)
    cpdef DeliveryRow _delivery(self, FrameRow row, object queue, MessageRow message)
    cpdef _settled(self, DeliveryRow delivery, str outcome, object at_ns, object requeue, bint multiple)
