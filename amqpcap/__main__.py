"""`python -m amqpcap`: the same as the `amqpcap` command."""

import sys

from amqpcap.cli import main

sys.exit(main())
