# Types for the compiled build of message_flows.py (Cython pure Python mode): the .py is the source.
cimport cython

cdef class KeyParts:
    cdef readonly Py_ssize_t parts
    cdef readonly dict keys
    cdef readonly Py_ssize_t keys_held

    @cython.locals(by_part=dict, cache=dict, i=Py_ssize_t, key=str, part=object, rows=list)
    cpdef dict rows_by_part(self, list keys)


cdef str _key(object message_id, object body_sha256, object exchange, object routing_key)


# flow_pairs, KeyRule and Flows: Python classes compiled as they are (the rule is a small share of a
# flows task: its columns' conversions and Arrow's takes are the rest)
