"""amqpcap: captured AMQP traffic to Delta tables. One package, a wing per concern (docs/architecture.md):

    protocol/    the spec, the codec, field tables, redaction, the decoder's errors
    capture/     capture files to packets, TCP reassembly, stream numbering, input listing
    connection/  AMQP framing of one TCP connection, its records, the decoder
    columnar/    column buffers and their Arrow layout
    tables/      the lake's tables, declared once, and the raw rows made from records
    rules/       the analytics tables' state machines (rows in, rows out)
    onepass/     records to every per-connection table in one pass, carried across runs
    lake/        Parquet files, sinks, the run log, carry-over, paths, upkeep, readers
    job/         the Spark jobs and their stages (the only wing that imports pyspark)
    cli/         the `amqpcap` command; decodeview/ and report/ are what it shows
    settings.py  every setting, declared once; process.py  what each process sets up

The hot modules run compiled (Cython) when the package was built with a C compiler, and as the same
Python source otherwise (the reference, AMQPCAP_INTERPRETED=1)."""

__version__ = "0.2.0"

import os as _os

# The modules a C compiler turns into extensions (setup.py): the same .py files, typed by their .pxd.
HOT_MODULES = ("capture.packets", "capture.tcp", "capture.stream_index", "capture.bucketing",
               "capture.readers.pcap", "capture.readers.pcapng", "capture.readers.source", "capture.readers.boundaries",
               "protocol.frames", "protocol.codec", "protocol.fields", "protocol.fieldtable", "protocol.frame_start",
               "tls.ciphers", "tls.records", "tls.layer", "tls.handshake", "tls.keys",
               "connection.options", "connection.framing", "connection.record", "connection.stream", "connection.decoder",
               "columnar.columns", "columnar.arrow_layout", "tables.rows",
               "rules.connection", "rules.deliveries", "rules.publishes", "rules.rpc_calls", "rules.channels",
               "rules.heartbeats", "rules.connections", "rules.errors", "rules.flow_control", "rules.common",
               "rules.message_flows", "rules.table_rows",
               "onepass.tabulate", "onepass.carry",
               "decodeview.readable", "decodeview.order", "decodeview.ends", "decodeview.filters", "decodeview.jsonl")


def _prefer_sources() -> None:
    """The hot modules load from their .py files, even where compiled ones exist."""
    import importlib.abc
    import importlib.util
    import sys
    directory = _os.path.dirname(__file__)
    prefix = __name__ + "."

    class _Interpreted(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            name = fullname.removeprefix(prefix)
            if name in HOT_MODULES and fullname != name:
                source = _os.path.join(directory, *name.split(".")) + ".py"
                return importlib.util.spec_from_file_location(fullname, source)
            return None

    sys.meta_path.insert(0, _Interpreted())


def build() -> str:
    """'compiled' when the hot modules are the Cython build in use, else 'interpreted'."""
    import importlib.util
    # The module each import would load, found without running it (that would load pyarrow & co.).
    compiled = [(importlib.util.find_spec(f"{__name__}.{name}").origin or "").endswith((".so", ".pyd"))
                for name in HOT_MODULES]
    return "compiled" if all(compiled) else "interpreted" if not any(compiled) else "partly compiled"


if _os.environ.get("AMQPCAP_INTERPRETED"):  # the reference: run the .py files even where compiled ones exist
    _prefer_sources()
