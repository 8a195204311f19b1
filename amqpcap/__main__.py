"""`python -m amqpcap`: the same as the `amqpcap` command."""

from amqpcap.cli import program

program()
