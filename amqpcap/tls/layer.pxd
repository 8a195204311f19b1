# Types for the compiled build of layer.py (Cython pure Python mode): the .py is the source.
# The record path (RecordReader -> TlsLayer.record -> Protection.open -> TlsSink.tls_plaintext) is C calls.
cimport cython
from amqpcap.tls.ciphers cimport Protection
from amqpcap.tls.records cimport RecordReader, RecordSink

cdef int CLEAR, EARLY, HANDSHAKE_KEYS, APPLICATION_KEYS, TLS13, _HEADER, _CCS, _HANDSHAKE, _APPLICATION, _ALERT
cdef long long MAX_SEARCH, MAX_WAITING


cdef class TlsSink:
    cpdef tls_client(self, int direction)
    cpdef tls_plaintext(self, int direction, long long offset, bytes data, long long ts_ns, int capture,
                        long long record)
    cpdef tls_lost(self, int direction, long long offset, long long size, long long ts_ns)
    cpdef tls_issue(self, int direction, str kind, str detail, long long skipped, long long start, long long end,
                    tuple ts)


cdef class Direction:
    cdef public RecordReader reader
    cdef public object messages
    cdef public Protection protection
    cdef public long long seq
    cdef public bint encrypted
    cdef public int stage
    cdef public object secret
    cdef public Protection early
    cdef public long long early_seq
    cdef public int generation
    cdef public bint keyed
    cdef public long long awaiting, awaiting_bytes
    cdef public long long plain_offset
    cdef public long long search
    cdef public long long search_at
    cdef public tuple search_first
    cdef public str search_why
    cdef public long long records, record_bytes, app_records, app_record_bytes, app_overhead
    cdef public long long skipped_bytes, plaintext_bytes, lost_plaintext_bytes, undecryptable_records, key_updates
    cdef public long long finished_ns
    cdef public str opaque_kind, opaque_why
    cdef public long long opaque_bytes, opaque_records, opaque_start, opaque_end
    cdef public tuple opaque_first, opaque_last
    cdef public long long failed, failed_bytes, failed_start, failed_end
    cdef public tuple failed_first, failed_last
    cdef public str failed_why
    cdef public list waiting
    cdef public long long waiting_bytes
    cdef public bint waited
    cdef public list held
    cdef public long long held_from, held_ts, held_record
    cdef public int held_capture


cdef class TlsLayer(RecordSink):
    cdef public TlsSink sink
    cdef public object keys
    cdef public object sessions
    cdef public tuple dirs
    cdef public int client
    cdef public object client_random, server_random, client_session_id, server_session_id, offered_ticket
    cdef public bint ticket_offered, early_offered
    cdef public int version
    cdef public object suite
    cdef public object sni, alpn_offered, alpn, resumed
    cdef public bint hello_retry, etm, ems, server_certificate_seen
    cdef public object certificate, new_ticket
    cdef public long long tickets_issued
    cdef public long long client_hello_ns, server_hello_ns, done_ns
    cdef public list alerts
    cdef public object master_from, block, master
    cdef public long long renegotiations

    @cython.locals(d=Direction, reader=RecordReader)
    cpdef data(self, int direction, long long offset, bytes data, long long ts_ns, int capture, long long record)
    @cython.locals(d=Direction, reader=RecordReader)
    cpdef gap(self, int direction, long long offset, long long size, long long ts_ns)
    @cython.locals(direction=cython.int, d=Direction, size=Py_ssize_t, protection=Protection, clear=cython.bint)
    cpdef record(self, RecordReader reader, int ctype, bytes header, object fragment, long long start, tuple first,
                 long long ts_ns, int capture, long long record)
    @cython.locals(d=Direction)
    cpdef bint _waits(self, int direction, int ctype, object fragment)
    cpdef _plaintext(self, Direction d, bytes data, long long ts_ns, int capture, long long record)
    @cython.locals(d=Direction, held=list)
    cpdef _flush(self, int direction)
    @cython.locals(d=Direction)
    cpdef long long earliest_pending(self, long long low)
