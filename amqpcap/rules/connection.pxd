# Types for the compiled build of connection.py (Cython pure Python mode): the .py is the source.
# Every frame is routed here to the rule sets: typed, each of those calls is a C call.
cimport cython
from amqpcap.rules.channels cimport ChannelRules
from amqpcap.rules.common cimport arguments, to_int
from amqpcap.rules.connections cimport ConnectionRules
from amqpcap.rules.deliveries cimport DeliveryRules
from amqpcap.rules.errors cimport ErrorRules
from amqpcap.rules.flow_control cimport FlowRules
from amqpcap.rules.heartbeats cimport HeartbeatRules
from amqpcap.rules.publishes cimport PublishRules
from amqpcap.rules.rpc_calls cimport RpcRules
from amqpcap.tables.rows cimport FrameRow, MessageRow


cdef frozenset _FINDING_METHODS


cdef class _Channel:
    cdef public int instance
    cdef public long long peak
    cdef public RpcRules rpc
    cdef public ChannelRules lifetimes
    cdef public DeliveryRules deliveries
    cdef public PublishRules publishes


cdef class ConnectionAnalyzer:
    cdef public object naming
    cdef public object emit
    cdef public object settings
    cdef public object findings
    cdef public ConnectionRules connection
    cdef public HeartbeatRules heartbeats
    cdef public ErrorRules errors
    cdef public FlowRules flow
    cdef public dict channels
    cdef public object close_ns
    cdef public object close_code
    cdef public object close_text
    cdef public bint tuned

    @cython.locals(channel=_Channel, outstanding=cython.longlong)
    cpdef frame(self, FrameRow row, MessageRow message=*)


cdef class Analytics:
    cdef public object out
    cdef public object emit
    cdef public object settings
    cdef public object findings
    cdef public dict early
    cdef public object naming
    cdef public dict open
    cdef public dict versions

    @cython.locals(analyzer=ConnectionAnalyzer, frame=FrameRow)
    cpdef frame(self, object row, object message=*)
