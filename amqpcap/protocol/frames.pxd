# Types for the compiled build of frames.py (Cython pure Python mode): the .py is the source.
cimport cython

cdef class Frame:
    cdef public int channel
    cdef public str kind
    cdef public long long size
    cdef public list warnings


cdef class MethodFrame(Frame):
    cdef public object method
    cdef public dict args


cdef class ContentHeader(Frame):
    cdef public int class_id
    cdef public str class_name
    cdef public int weight
    cdef public object body_size
    cdef public tuple property_flags
    cdef public dict properties


cdef class ContentBody(Frame):
    cdef public object payload


cdef class Heartbeat(Frame):
    pass


cdef class OtherFrame(Frame):
    cdef public int frame_type
    cdef public str type_name


cdef object _frame(Frame frame, int channel, str kind, long long size, list warnings)
@cython.locals(frame=MethodFrame)
cpdef MethodFrame method_frame(int channel, object method, dict args, long long size, list warnings)
@cython.locals(frame=ContentHeader)
cpdef ContentHeader header_frame(int channel, int class_id, str class_name, int weight, object body_size,
                                 tuple property_flags, dict properties, long long size, list warnings)
@cython.locals(frame=ContentBody)
cpdef ContentBody body_frame(int channel, object payload, long long size)
@cython.locals(frame=Heartbeat)
cpdef Heartbeat heartbeat_frame(int channel, long long size)
