"""The protocol: the AMQP XML spec loaded (`spec`, `spec_cache`), compiled into decoders
(`compiler`, `fields`, `fieldtable`) and driven by one frame codec (`codec` -> `frames`); where a
frame may start (`frame_start`), which fields are secrets (`redact`), what other protocols look like
on an AMQP port (`other_protocols`), the decoder's typed errors (`errors`). Imports nothing else
of amqpcap."""
