# Packaged as amqpcap.protocol.specs (see pyproject.toml) so the XML travels with the code to executors.
