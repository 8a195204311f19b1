"""The Spark side of amqpcap: decode jobs, Delta lake I/O and analytics transforms."""
