# Types for the compiled build of pcap.py (Cython pure Python mode): the .py is the source.
# Typed, `scan_records` reads record headers with C loads and compares in C.
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize

cdef bint COMPILED
cdef int NEEDS_BYTES, IMPLAUSIBLE, PLAUSIBLE


@cython.locals(sec=cython.longlong, sub=cython.longlong, caplen=cython.longlong, origlen=cython.longlong,
               n=cython.Py_ssize_t, last_header=cython.Py_ssize_t, end=cython.Py_ssize_t, little=cython.bint,
               scale=cython.longlong, sub_max=cython.longlong, check_origlen=cython.bint,
               max_caplen=cython.longlong, max_origlen=cython.longlong, day=cython.longlong,
               header=cython.Py_ssize_t, record=bytes)
cpdef tuple scan_records(bytes buf, Py_ssize_t p, long long stop_at, long long last_sec, object rules, list out,
                         long long at=*)


@cython.locals(first=cython.longlong)
cdef inline long long _u32(bytes buf, Py_ssize_t i, bint little)
