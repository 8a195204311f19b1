"""One AMQP connection over TCP: each direction's bytes framed by the codec (`framing`: a state
machine per direction over its own buffer), the connection that turns frames into records
(`stream`, `record`), the options it reads (`options`), and the decoder that drives captures
through it all (`decoder`). Knows no tables."""
