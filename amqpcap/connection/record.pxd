# Types for the compiled build of record.py (Cython pure Python mode): the .py is the source.
# A record's fields are C members: whoever types a record as Record reads them without a lookup.
cimport cython
from cpython.long cimport PyLong_AsLongLongAndOverflow

cdef frozenset FIELDS
cdef dict _ATTRIBUTE
cdef bint COMPILED


cdef class Record:
    cdef public tuple shape
    cdef public dict extra
    cdef public object ts, ts_ns, ts_last_ns, capture, pcap_record, pcap_record_last, tcp_stream
    cdef public object connection, client, server, dir, channel, kind, offset, size, tls
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
cpdef mark_tls(Record record)
@cython.locals(record=Record)
cpdef Record end_record(str connection, dict summary)
@cython.locals(record=Record)
cpdef Record from_dict(dict values)
cpdef Record as_record(object value)


cdef inline object _seconds(object ts_ns):
    """ts_ns / 1e9 for an int: a C long long converted (rounded to nearest, as Python converts an
    int to a float) and divided as a double; one past 64 bits as Python divides it."""
    cdef int overflow = 0
    cdef long long value = PyLong_AsLongLongAndOverflow(ts_ns, &overflow)
    if overflow:
        return ts_ns / 1e9
    return <double>value / 1e9
