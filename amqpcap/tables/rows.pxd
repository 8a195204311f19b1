# Types for the compiled build of rows.py (Cython pure Python mode): the .py is the source.
# Typed dicts let the row builders read records with the dict API directly; the frames and
# messages rows are extension types whose fields are C members (the analytics read them as such),
# and calls between them skip Python's method lookup.
cimport cython

cdef dict _DAYS
cdef long long _DAY_NS
cdef long long _LAST_DAY
cdef object _LAST_DATE

cdef dict _ARGUMENTS
cdef tuple _CLOSES
cdef object _DUMPS

@cython.locals(text=bytes)
cpdef object to_json(object value)
cpdef object _int64(object value)
cpdef object message_key(object connection, object direction, object stream_offset)
@cython.locals(days=cython.longlong)
cpdef object _date(long long ts_ns)


from amqpcap.columnar.columns cimport TypedRow
from amqpcap.connection.record cimport Record


# Every typed row's last columns: whence and by which run (amqpcap.onepass.carry sets the first two).
cdef class TableRow(TypedRow):
    cdef public object source, provisional, run_id


# The columns a frames and a messages row begin with: where in the capture their record was.
cdef class RecordRow(TableRow):
    cdef public object date, connection, capture, pcap_record, pcap_record_last, tcp_stream, ts, ts_ns
    cdef public object client, server, direction, channel

    cpdef place(self, Record record)


# The fields are the table's columns (with their bases'); column_values gives them in its order (a
# test holds them to tables.FRAMES).
cdef class FrameRow(RecordRow):
    cdef public object ts_last_ns, kind, stream_offset, frame_bytes
    cdef public object method, class_id, method_id, exchange, routing_key, queue, consumer_tag, delivery_tag
    cdef public object multiple, requeue, redelivered, mandatory, immediate, no_ack, no_wait, no_local
    cdef public object exclusive, passive, durable, auto_delete, internal, exchange_type, if_unused
    cdef public object if_empty, prefetch_size, prefetch_count, qos_global, message_count, consumer_count
    cdef public object reply_code, reply_text, failing_class_id, failing_method_id, args_json, body_size
    cdef public object properties_json, protocol_version, protocol_header, connection_seq, tls, parsed_args

    cpdef tuple column_values(self)


# The same for tables.MESSAGES.
cdef class MessageRow(RecordRow):
    cdef public object method, stream_offset, message_key, exchange
    cdef public object routing_key, delivery_tag, consumer_tag, redelivered, mandatory, reply_code
    cdef public object reply_text, content_type, content_encoding, headers, headers_json, delivery_mode
    cdef public object priority, correlation_id, reply_to, expiration, message_id, timestamp, type, user_id
    cdef public object app_id, body_size, body_received, body_frames, complete, body_sha256, body

    cpdef tuple column_values(self)


cdef _set_argument(FrameRow row, str column, object value)


cdef class RawRows:
    cdef public object run_id

    @cython.locals(row=FrameRow, args=dict, plan=tuple)
    cpdef FrameRow frame_row(self, Record record)
    @cython.locals(row=MessageRow, args=dict, message=dict, properties=dict)
    cpdef MessageRow message_row(self, Record record)
    @cython.locals(row=dict)
    cpdef dict issue_row(self, Record record)
    cpdef dict stream_row(self, dict summary)
    cpdef object tls_row(self, dict summary)
