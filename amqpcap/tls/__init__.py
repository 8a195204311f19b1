"""TLS (AMQPS), between capture and connection: a connection's TCP bytes in, its decrypted bytes
out to the AMQP decoding above (`layer`: both directions' records, the handshake and its keys),
its records framed per direction (`records`), the handshake's messages (`handshake`), keys found in
key logs (`keylog`) and derived by the key schedules (`keys`), records opened (`ciphers`: the
`cryptography` package's AEAD, CBC and HMAC), cipher suites by their IANA names (`suites`), and the
TLS 1.2 sessions a decoder saw established, for those that resume them (`sessions`). Imports no
AMQP decoding."""
