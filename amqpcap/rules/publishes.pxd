# Types for the compiled build of publishes.py (Cython pure Python mode): the .py is the source.
cimport cython
from amqpcap.rules.common cimport micros
from amqpcap.rules.table_rows cimport PublishRow
from amqpcap.tables.rows cimport FrameRow, MessageRow


cdef frozenset _RELEVANT
cdef tuple _LIFETIME_ENDS


cdef class _Publish:
    cdef public PublishRow row
    cdef public bint confirm
    cdef public bint tx
    cdef public bint returnable


cdef class PublishRules:
    cdef public object emit
    cdef public long long return_window
    cdef public object return_wait_ns
    cdef public int instance
    cdef public bint confirming
    cdef public bint transactional
    cdef public long long seq
    cdef public dict outstanding
    cdef public object returnable
    cdef public list in_tx

    cpdef _begin(self, int instance)
    @cython.locals(publish=_Publish, match=_Publish, returned=PublishRow, confirmed=PublishRow)
    cpdef method(self, FrameRow row, int instance, MessageRow message)
    @cython.locals(publish=_Publish)
    cpdef end(self)
    @cython.locals(published=PublishRow, publish=_Publish)
    cpdef _publish(self, FrameRow row, MessageRow message)
    cpdef _expire_returns(self, object now_ns)
    cpdef _release(self, _Publish publish)
    cpdef _maybe_final(self, _Publish publish)
