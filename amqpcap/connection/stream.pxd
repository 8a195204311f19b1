# Types for the compiled build of stream.py (Cython pure Python mode): the .py is the source.
cimport cython
from amqpcap.protocol.codec cimport Codec
from amqpcap.protocol.frame_start cimport FrameStart
from amqpcap.protocol.frames cimport Frame, MethodFrame, ContentHeader, ContentBody
from amqpcap.connection.record cimport Record, add_message, end_record, new_record
from amqpcap.capture.tcp cimport HalfStream, TcpConnection
from amqpcap.connection.framing cimport BodyFrame, FrameReader, FrameSink
from amqpcap.connection.options cimport StreamOptions
from amqpcap.tls.layer cimport TlsLayer, TlsSink

cdef dict _HEADER_TEXTS
cdef object _EMPTY_SHA256

cpdef object body_hasher(object data=*)


cdef class AmqpConnection


cdef class _Content:
    cdef public list records
    cdef public Record method
    cdef public object body_size
    cdef public long long received
    cdef public long long frames
    cdef public bint intact
    cdef public object hasher
    cdef public object body
    cdef public list received_parts
    cdef public long long received_size
    cdef public object properties
    cdef public long long last_ns

    cpdef object received_bytes(self)


cdef class AmqpConnection(FrameSink):
    cdef public TcpConnection tcp
    cdef public object on_end
    cdef public str id
    cdef public dict codecs
    cdef public list out
    cdef public list capture_names
    cdef public tuple endpoints
    cdef public tuple ports
    cdef public object version
    cdef public tuple readers
    cdef public object client
    cdef public tuple labels
    cdef public tuple directions
    cdef public str status
    cdef public object protocol
    cdef public list pending
    cdef public dict contents
    cdef public long long ignored_bytes
    cdef public list held
    cdef public long long held_bytes
    cdef public int first_capture
    cdef public object client_reason
    cdef public object end_reason
    cdef public long long headers_folded
    cdef public long long bodies_folded
    cdef public TlsLayer tls

    @cython.locals(reader=FrameReader)
    cpdef data(self, int direction, long long offset, bytes data, long long ts_ns, int capture, long long record)
    @cython.locals(reader=FrameReader)
    cpdef gap(self, int direction, long long offset, long long size, long long ts_ns)
    @cython.locals(tcp=TcpConnection, half=HalfStream, reader=FrameReader, content=_Content, record=Record)
    cpdef long long earliest_pending(self, long long low)
    cpdef str speaks(self)
    cpdef dict summary(self)
    cpdef bint syn_seen(self, int direction)
    cpdef _classify(self, int direction)
    cpdef _port_guess(self, object server_ports=*)
    @cython.locals(record=Record)
    cpdef int protocol_header(self, FrameReader reader, object header, long long offset)
    cpdef int no_protocol_header(self, FrameReader reader, object buf, long long pos)
    cpdef int _counted(self, FrameReader reader, str what)
    cpdef int mid_stream_start(self, FrameReader reader, object buf, long long pos)
    cpdef _decide_client(self, object direction, str how)
    @cython.locals(channel=cython.int, record=Record, content=_Content, method_frame=MethodFrame,
                   header=ContentHeader, body=ContentBody, orphan=cython.bint)
    cpdef frame(self, FrameReader reader, Frame frame, long long start, long long end)
    cpdef _warn(self, FrameReader reader, Frame frame, long long start, long long end, object channel)
    @cython.locals(first=cython.longlong)
    cpdef _fold(self, FrameReader reader, _Content content, long long start, long long end, object ts=*)
    @cython.locals(content=_Content, size=cython.longlong, record=Record)
    cpdef _body(self, FrameReader reader, int channel, object payload, long long start, long long end,
                bint intact=*, object ts=*)
    @cython.locals(content=_Content)
    cpdef body_bytes(self, FrameReader reader, int channel, object data)
    cpdef streamed_body(self, FrameReader reader, BodyFrame body, long long end)
    @cython.locals(content=_Content)
    cpdef body_mark(self, FrameReader reader, int channel)
    @cython.locals(content=_Content)
    cpdef body_lost(self, FrameReader reader, BodyFrame body)
    cpdef _hash(self, _Content content, object data)
    @cython.locals(content=_Content, method=Record, header=Record)
    cpdef _close_content(self, tuple key, bint complete, str why=*)
    @cython.locals(record=Record)
    cpdef issue(self, FrameReader reader, str kind, str detail, long long skipped, long long start, long long end,
                object channel, object ts=*)
    @cython.locals(capture=cython.int, record=Record)
    cpdef Record _record(self, FrameReader reader, str kind, long long start, long long end, object channel,
                         bint hold=*, object ts=*)
    cpdef _release(self, int direction, Record record)
    cpdef _label(self, int direction, Record record)

    @cython.locals(reader=FrameReader)
    cpdef tls_plaintext(self, int direction, long long offset, bytes data, long long ts_ns, int capture,
                        long long record)
    @cython.locals(reader=FrameReader)
    cpdef tls_lost(self, int direction, long long offset, long long size, long long ts_ns)


cdef class _TlsSide(TlsSink):
    cdef public AmqpConnection connection
