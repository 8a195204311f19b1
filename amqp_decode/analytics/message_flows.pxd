# Types for the compiled build of message_flows.py (Cython pure Python mode): the .py is the source.
cimport cython
from amqp_decode.rows cimport TableRow

cdef Py_ssize_t _MESSAGE_ID, _BODY_SHA256, _EXCHANGE, _ROUTING_KEY, _PUBLISHED_NS, _DELIVERED_NS


cdef class SideParts:
    cdef readonly Py_ssize_t parts
    cdef readonly object add
    cdef readonly dict keys
    cdef readonly Py_ssize_t keys_held
    cdef readonly list publish_places
    cdef readonly list delivery_places

    cpdef see(self, object table, object row)
    @cython.locals(typed=TableRow, values=tuple, side=list, places=list, i=Py_ssize_t, key=str, part=object)
    cpdef side(self, object row, bint is_delivery)


cdef list _places(object names)
cdef str _key(object message_id, object body_sha256, object exchange, object routing_key)


@cython.locals(k=Py_ssize_t, start=Py_ssize_t, first=Py_ssize_t, i=Py_ssize_t, publish=list, delivery=list,
               match=list)
cpdef tuple flow_pairs(list bounds, list is_delivery, list times, list streams, list redelivered, list by_id)


@cython.locals(row=Py_ssize_t, index=Py_ssize_t, i=Py_ssize_t, publishes=list, paired=set, position=dict,
               last=dict)
cdef _pair(Py_ssize_t start, Py_ssize_t end, list is_delivery, list times, list streams, list redelivered,
           list publish, list delivery)
