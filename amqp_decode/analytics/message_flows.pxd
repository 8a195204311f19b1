# Types for the compiled build of message_flows.py (Cython pure Python mode): the .py is the source.
cimport cython

cdef class KeyParts:
    cdef readonly Py_ssize_t parts
    cdef readonly dict keys
    cdef readonly Py_ssize_t keys_held

    @cython.locals(by_part=dict, cache=dict, i=Py_ssize_t, key=str, part=object, rows=list)
    cpdef dict rows_by_part(self, list keys)


cdef str _key(object message_id, object body_sha256, object exchange, object routing_key)


@cython.locals(k=Py_ssize_t, start=Py_ssize_t, first=Py_ssize_t, i=Py_ssize_t, publish=list, delivery=list,
               match=list)
cpdef tuple flow_pairs(list bounds, list is_delivery, list times, list streams, list redelivered, list by_id)


@cython.locals(row=Py_ssize_t, index=Py_ssize_t, i=Py_ssize_t, publishes=list, paired=set, position=dict,
               last=dict)
cdef _pair(Py_ssize_t start, Py_ssize_t end, list is_delivery, list times, list streams, list redelivered,
           list publish, list delivery)
