# Types for the compiled build of common.py (Cython pure Python mode): the .py is the source.
# The rule sets cimport these helpers: compiled, each use is a C call, not a Python one.

from amqpcap.tables.rows cimport FrameRow

cpdef object micros(object ts_ns)
cpdef str side(object direction)
cpdef dict arguments(FrameRow row)
cpdef object text_of(object value)
cpdef object to_int(object value)
cpdef dict where_from(FrameRow row)
