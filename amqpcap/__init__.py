"""amqpcap: captured AMQP traffic to Delta tables. The product around the libraries: the command
line (`amqpcap.cli`), its console (logging, progress) and the lake helpers."""

__version__ = "0.2.0"
