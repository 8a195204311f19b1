# Types for the compiled build of options.py (Cython pure Python mode): the .py is the source.

cdef class StreamOptions:
    cdef public frozenset amqp_ports
    cdef public frozenset tls_ports
    cdef public str default_version
    cdef public long long max_frame
    cdef public long long resync_max_frame
    cdef public bint capture_bodies
    cdef public long long body_cap
    cdef public long long pending_records
    cdef public bint resumable
    cdef public long long resumable_body_cap
    cdef public bint fold_content
    cdef public object keys
    cdef public object sessions
