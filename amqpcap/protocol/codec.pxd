# Types for the compiled build of codec.py (Cython pure Python mode): the .py is the source.
cimport cython
from amqpcap.protocol.frames cimport (Frame, MethodFrame, ContentHeader, body_frame, header_frame, heartbeat_frame,
                                      method_frame)
from amqpcap.protocol.fields cimport decode_args, decode_properties

from cpython.bytes cimport PyBytes_FromStringAndSize

cdef bint IN_C
cdef int _METHOD, _HEADER, _BODY, _HEARTBEAT, _OTHER
cdef long long _HEADER_SIZE


cdef inline bytes _frame_bytes(const unsigned char *view, long long start, long long size):
    # (C only: decode_frame checked start + size against the buffer's length before)
    return PyBytes_FromStringAndSize(<const char *>(view + start), size)


cdef class Codec:
    cdef public object spec
    cdef public object tables
    cdef public int frame_end
    cdef public dict frame_types
    cdef bytes _frame_kinds
    cdef public dict _methods
    cdef public dict _properties
    cdef public tuple secret_ids

    @cython.locals(view="const unsigned char*", length=Py_ssize_t, frame_type=cython.int, channel=cython.int,
                   size=cython.ulonglong, start=cython.longlong, end=cython.longlong, frame=Frame, kind=cython.int,
                   payload=bytes)
    cpdef tuple decode_frame(self, object buf, long long offset=*, long long max_payload=*)
    cpdef tuple frame_header(self, object buf, long long offset)
    @cython.locals(class_id=cython.int, method_id=cython.int, end=cython.longlong)
    cpdef MethodFrame decode_method(self, bytes payload, int channel=*)
    @cython.locals(class_id=cython.int, weight=cython.int, word=cython.int, o=cython.longlong)
    cpdef ContentHeader decode_header(self, bytes payload, int channel=*)
