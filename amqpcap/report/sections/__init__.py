"""The report's sections, in page order: each module has build(ctx) -> Section."""

from amqpcap.report.sections import (
                                     acks,
                                     attention,
                                     confirms,
                                     decode_issues,
                                     errors,
                                     flow,
                                     heartbeats,
                                     rates,
                                     rpc,
                                     talkers,
                                     timeline,
)

SECTIONS = (attention, acks, confirms, rpc, rates, errors, timeline, heartbeats, flow, talkers, decode_issues)
