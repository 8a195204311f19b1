# Types for the compiled build of stream.py (Cython pure Python mode): the .py is the source.
cimport cython
from amqp_decode.codec cimport Codec
from amqp_decode.frame_start cimport FrameStart
from amqp_decode.frames cimport Frame, MethodFrame, ContentHeader, ContentBody
from amqp_decode.record cimport Record, add_message, end_record, new_record
from amqp_decode.tcp cimport HalfStream, StreamSink, TcpConnection

cdef int START, FRAMES, RESYNC, BODY, SKIP, WALK, OPAQUE, AMQP_1_0_HEADER
cdef long long STREAM_BODY_MIN
cdef dict _HEADER_TEXTS


cdef class AmqpConnection
cdef class StreamOptions


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


cdef class BodyFrame:
    cdef public long long start
    cdef public int channel
    cdef public long long size
    cdef public long long remaining
    cdef public bint intact
    cdef public long long lost
    cdef public object first_ts
    cdef public object capture
    cdef public object record
    cdef public object mark

    cpdef long long received(self)


cdef class FrameReader:
    cdef public AmqpConnection connection
    cdef public int direction
    cdef public bytearray buf
    cdef public long long base
    cdef public long long end
    cdef public object chunks
    cdef public int state
    cdef public bint mid_stream
    cdef public long long skipped
    cdef public tuple skip_first
    cdef public tuple skip_last
    cdef public long long skip_remaining
    cdef public str skip_detail
    cdef public set resync_live
    cdef public list resync_due
    cdef public object resync_order
    cdef public long long resync_scanned
    cdef public BodyFrame body
    cdef public long long walked_frames
    cdef public long long walked_sasl
    cdef public long long undecoded_frames
    cdef public str opaque_kind
    cdef public long long frames
    cdef public long long decoded_bytes
    cdef public long long skipped_bytes

    @cython.locals(used=cython.longlong)
    cpdef data(self, long long offset, bytes data, long long ts_ns, int capture, long long record)
    @cython.locals(buffered=cython.longlong, lost_from=cython.longlong, body=BodyFrame)
    cpdef gap(self, long long offset, long long size, long long ts_ns)
    @cython.locals(left=cython.longlong, body=BodyFrame)
    cpdef finish(self)
    @cython.locals(pos=cython.longlong)
    cpdef _process(self, bint final)
    cpdef _forget_chunks(self)
    @cython.locals(pos=cython.longlong, size=cython.longlong, next_pos=cython.longlong, state=cython.int,
                   max_frame=cython.longlong, available=cython.longlong, step=cython.longlong,
                   codec=Codec, frame=Frame)
    cpdef long long _run(self, object buf, bint final)
    cpdef _report_skipped(self, long long end, object last_byte)
    cpdef str _skip_text(self, long long start)
    @cython.locals(size=cython.longlong, available=cython.longlong, step=cython.longlong,
                   frame_size=cython.longlong, offset_words=cython.int, frame_type=cython.int)
    cpdef long long _walk(self, object buf, long long pos, bint final)
    @cython.locals(buffered=cython.longlong, inside=cython.bint)
    cpdef _walk_gap(self, long long offset, long long size)
    cpdef _end_skip(self, long long pos=*)
    cpdef _known_frame_size(self)
    @cython.locals(starts=FrameStart, i=cython.longlong, available=cython.longlong, due=list, live=set,
                   ready=list)
    cpdef tuple _find_sync(self, object buf, long long pos, bint final)
    @cython.locals(size=cython.longlong, end=cython.longlong)
    cpdef long long _needed(self, object buf, long long i)
    cpdef _judge(self, object buf, long long i, bint final)
    cpdef bint _start_body(self, object buf, long long pos)
    @cython.locals(payload_left=cython.longlong, take=cython.longlong, body=BodyFrame)
    cpdef long long _feed_body(self, object buf, long long pos)
    cpdef _emit_error(self, object error, long long pos)
    cpdef _issue(self, str kind, str detail, long long skipped, long long start, long long end, object channel,
                 tuple first=*, tuple last_byte=*)
    cpdef tuple _first_byte(self, long long offset)
    cpdef long long earliest_pending(self, long long low)
    # (only the offset typed: the times and record numbers are handed on as the objects they are)
    @cython.locals(chunk_end=cython.longlong)
    cpdef tuple timestamps(self, long long start, long long end)


cdef class AmqpConnection(StreamSink):
    cdef public TcpConnection tcp
    cdef public object on_end
    cdef public str id
    cdef public dict codecs
    cdef public StreamOptions settings
    cdef public list out
    cdef public list capture_names
    cdef public tuple endpoints
    cdef public tuple ports
    cdef public object version
    cdef public Codec codec
    cdef public FrameStart frame_start
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
