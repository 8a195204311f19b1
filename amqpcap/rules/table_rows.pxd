# Types for the compiled build of table_rows.py (Cython pure Python mode): the .py is the source.
from amqpcap.tables.rows cimport FrameRow, MessageRow, TableRow, message_key

cdef bint COMPILED


# The columns every one of these tables begins with.
cdef class ChannelRow(TableRow):
    cdef public object date, connection, capture, client, server, channel, channel_instance

    cpdef begin(self, FrameRow frame, object instance)


cdef class MessageSideRow(ChannelRow):
    cdef public object message_key, message_id, correlation_id, app_id, body_size, body_sha256

    cpdef carried(self, FrameRow frame, MessageRow message)


# The fields are the table's columns (with their bases'); column_values gives them in its order.
cdef class PublishRow(MessageSideRow):
    cdef public object published_at, published_ns, exchange, routing_key, mandatory, confirm_seq
    cdef public object confirm_outcome, confirmed_at, confirmed_ns, confirm_latency_ms, confirmed_by_multiple
    cdef public object returned, return_code, return_text, tx_outcome

    cpdef tuple column_values(self)


cdef class DeliveryRow(MessageSideRow):
    cdef public object method, delivery_tag, consumer_tag, queue, exchange, routing_key, redelivered
    cdef public object delivered_at, delivered_ns, outcome, requeue, settled_at, settled_ns, settle_latency_ms
    cdef public object settled_by_multiple, death_exchange, death_queue, death_reason

    cpdef tuple column_values(self)
    cpdef dead_lettered(self, list headers)


cdef class RpcCallRow(ChannelRow):
    cdef public object requester, request, reply, request_at, reply_at, latency_ms, outcome, error_code
    cdef public object error_text
    cdef public object request_ns

    cpdef tuple column_values(self)
