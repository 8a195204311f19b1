# Types for the compiled build of framing.py (Cython pure Python mode): the .py is the source.
cimport cython
from amqpcap.capture.tcp cimport StreamSink
from amqpcap.connection.options cimport StreamOptions
from amqpcap.protocol.codec cimport Codec
from amqpcap.protocol.frame_start cimport FrameStart
from amqpcap.protocol.frames cimport Frame

cdef int START, FRAMES, RESYNC, BODY, SKIP, WALK, OPAQUE, AMQP_1_0_HEADER
cdef long long STREAM_BODY_MIN


cdef class FrameReader


cdef class FrameBuffer:
    cdef public bytearray buf
    cdef public long long base
    cdef public long long end
    cdef public object chunks

    cpdef arrived(self, long long size, object ts_ns, object capture, object record)
    cpdef missing(self, long long offset, long long size, object ts_ns)
    cpdef consume(self, long long used)
    cpdef drop(self, long long offset)
    cpdef forget_chunks(self)
    cpdef tuple first_byte(self, long long offset)
    # (only the offset typed: the times and record numbers are handed on as the objects they are)
    @cython.locals(chunk_end=cython.longlong)
    cpdef tuple timestamps(self, long long start, long long end)
    cpdef long long earliest(self, long long low)


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


cdef class FrameSink(StreamSink):
    cdef public Codec codec
    cdef public FrameStart frame_start
    cdef public StreamOptions settings

    cpdef bint syn_seen(self, int direction)
    cpdef int protocol_header(self, FrameReader reader, object header, long long offset)
    cpdef int no_protocol_header(self, FrameReader reader, object buf, long long pos)
    cpdef int mid_stream_start(self, FrameReader reader, object buf, long long pos)
    cpdef frame(self, FrameReader reader, Frame frame, long long start, long long end)
    cpdef body_mark(self, FrameReader reader, int channel)
    cpdef body_bytes(self, FrameReader reader, int channel, object data)
    cpdef streamed_body(self, FrameReader reader, BodyFrame body, long long end)
    cpdef body_lost(self, FrameReader reader, BodyFrame body)
    cpdef issue(self, FrameReader reader, str kind, str detail, long long skipped, long long start, long long end,
                object channel, object ts=*)


cdef class FrameReader:
    cdef public FrameSink connection
    cdef public int direction
    cdef public FrameBuffer buffer
    cdef public int state
    cdef public bint needs_more
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

    @cython.locals(used=cython.longlong, buffer=FrameBuffer)
    cpdef data(self, long long offset, bytes data, long long ts_ns, int capture, long long record)
    @cython.locals(buffered=cython.longlong, lost_from=cython.longlong, body=BodyFrame)
    cpdef gap(self, long long offset, long long size, long long ts_ns)
    @cython.locals(left=cython.longlong, body=BodyFrame)
    cpdef finish(self)
    cpdef _process(self, bint final)
    @cython.locals(pos=cython.longlong, size=cython.longlong, walked=cython.longlong, state=cython.int)
    cpdef long long _run(self, object buf, bint final)
    @cython.locals(size=cython.longlong, next_pos=cython.longlong, max_frame=cython.longlong, base=cython.longlong,
                   codec=Codec, frame=Frame, connection=FrameSink)
    cpdef long long _framing(self, object buf, long long pos)
    @cython.locals(available=cython.longlong)
    cpdef long long _starting(self, object buf, long long pos, bint final)
    @cython.locals(base=cython.longlong, start=cython.longlong)
    cpdef long long _resyncing(self, object buf, long long pos, bint final)
    @cython.locals(step=cython.longlong)
    cpdef long long _skipping(self, object buf, long long pos)
    cpdef long long _counting(self, object buf, long long pos)
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
    cpdef long long earliest_pending(self, long long low)


