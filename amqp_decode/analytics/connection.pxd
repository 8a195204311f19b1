# Types for the compiled build of connection.py (Cython pure Python mode): the .py is the source.
# Every frame is routed here to the rule sets: typed, each of those calls is a C call.
cimport cython
from amqp_decode.analytics.channels cimport ChannelRules
from amqp_decode.analytics.common cimport arguments, to_int
from amqp_decode.analytics.connections cimport ConnectionRules
from amqp_decode.analytics.deliveries cimport DeliveryRules
from amqp_decode.analytics.errors cimport ErrorRules
from amqp_decode.analytics.flow_control cimport FlowRules
from amqp_decode.analytics.heartbeats cimport HeartbeatRules
from amqp_decode.analytics.publishes cimport PublishRules
from amqp_decode.analytics.rpc_calls cimport RpcRules
from amqp_decode.rows cimport FrameRow, MessageRow


cdef class _Channel:
    cdef public int instance
    cdef public RpcRules rpc
    cdef public ChannelRules lifetimes
    cdef public DeliveryRules deliveries
    cdef public PublishRules publishes


cdef class ConnectionAnalyzer:
    cdef public object naming
    cdef public object emit
    cdef public object settings
    cdef public ConnectionRules connection
    cdef public HeartbeatRules heartbeats
    cdef public ErrorRules errors
    cdef public FlowRules flow
    cdef public dict channels
    cdef public object close_ns
    cdef public object close_code
    cdef public object close_text
    cdef public bint tuned

    @cython.locals(channel=_Channel)
    cpdef frame(self, FrameRow row, MessageRow message=*)


cdef class Analytics:
    cdef public object emit
    cdef public object settings
    cdef public object naming
    cdef public dict open
    cdef public dict versions

    @cython.locals(analyzer=ConnectionAnalyzer, frame=FrameRow)
    cpdef frame(self, object row, object message=*)
