# Types for the compiled build of record.py (Cython pure Python mode): the .py is the source.
# A record's fields are C members: whoever types a record as Record reads them without a lookup.
cimport cython

cdef frozenset FIELDS
cdef dict _ATTRIBUTE
cdef bint COMPILED


cdef class Record:
    cdef public tuple shape
    cdef public dict extra
    cdef public object ts, ts_ns, ts_last_ns, capture, pcap_record, pcap_record_last, tcp_stream
    cdef public object connection, client, server, dir, channel, kind, offset, size
    cdef public object method, class_id, method_id, args, message
    cdef public object class_name, weight, body_size, property_flags, properties
    cdef public object body_frame_size, issue_kind, detail, bytes_skipped, file_offset, file_end_offset
    cdef public object version, protocol_header, raw, summary

    cpdef object _value(self, object key)
    cpdef dict as_dict(self)


@cython.locals(record=Record)
cpdef Record new_record(str kind, object ts_ns, object ts_last_ns, object capture, object pcap_record,
                        object pcap_record_last, object tcp_stream, object connection, object client,
                        object server, object direction, object channel, object offset, object size)
cpdef add_message(Record record, dict message)
@cython.locals(record=Record)
cpdef Record end_record(str connection, dict summary)
@cython.locals(record=Record)
cpdef Record from_dict(dict values)
cpdef Record as_record(object value)
