# Packaged as amqp_decode.specs (see pyproject.toml) so the XML travels with the code to executors.
