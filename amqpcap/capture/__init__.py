"""Captures: which files (`inputs`), their records (`readers`: pcap, pcapng, gzip, byte ranges,
damage), link/IP/TCP headers (`packets`), TCP reassembly (`tcp`), Wireshark's stream numbers
(`stream_index`) and segments sorted into connection buckets (`bucketing`). Knows nothing of AMQP
framing."""
