# Types for the compiled build of table_rows.py (Cython pure Python mode): the .py is the source.
from amqp_decode.rows cimport TableRow

cdef bint COMPILED


# The fields are the table's columns, in its order.
cdef class PublishRow(TableRow):
    cdef public object date, connection, capture, client, server, channel, channel_instance, message_key
    cdef public object published_at, published_ns, exchange, routing_key, mandatory, message_id, correlation_id
    cdef public object app_id, body_size, body_sha256, confirm_seq, confirm_outcome, confirmed_at, confirmed_ns
    cdef public object confirm_latency_ms, confirmed_by_multiple, returned, return_code, return_text
    cdef public object tx_outcome, source, provisional, run_id

    cpdef tuple column_values(self)


# The fields are the table's columns, in its order.
cdef class DeliveryRow(TableRow):
    cdef public object date, connection, capture, client, server, channel, channel_instance, method
    cdef public object message_key, delivery_tag, consumer_tag, queue, exchange, routing_key, redelivered
    cdef public object delivered_at, delivered_ns, outcome, requeue, settled_at, settled_ns, settle_latency_ms
    cdef public object settled_by_multiple, message_id, correlation_id, app_id, body_size, body_sha256, source
    cdef public object provisional, run_id

    cpdef tuple column_values(self)


# The fields are the table's columns, in its order.
cdef class RpcCallRow(TableRow):
    cdef public object date, connection, capture, client, server, channel, channel_instance, requester, request
    cdef public object reply, request_at, reply_at, latency_ms, outcome, error_code, error_text, source
    cdef public object provisional, run_id
    cdef public object request_ns

    cpdef tuple column_values(self)
