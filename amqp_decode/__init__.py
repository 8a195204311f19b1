"""Spec-driven AMQP 0-9-1 / 0-9 decoding, from capture files to frames and analytics rows. No Spark
here. The hot modules run compiled (Cython) when the package was built with a C compiler, and as
the same Python source otherwise (the reference)."""

__version__ = "0.2.0"

import os as _os

# The modules a C compiler turns into extensions (setup.py): the same .py files, typed by their .pxd.
HOT_MODULES = ("packets", "tcp", "frames", "record", "stream", "codec", "fields", "fieldtable", "decoder", "rows", "tabulate",
               "stream_index", "frame_start", "columns", "carry", "bucketing", "arrow_layout",
               "capture.pcap", "capture.pcapng", "capture.source", "capture.boundaries",
               "analytics.connection", "analytics.deliveries", "analytics.publishes", "analytics.rpc_calls",
               "analytics.channels", "analytics.heartbeats", "analytics.connections", "analytics.errors",
               "analytics.flow_control", "analytics.common", "analytics.message_flows", "analytics.table_rows")

def prefer_sources(package: str, modules: tuple[str, ...]) -> None:
    """`package`'s hot `modules` load from their .py files, even where compiled ones exist."""
    import importlib.abc
    import importlib.util
    import sys
    directory = _os.path.dirname(sys.modules[package].__file__)
    prefix = package + "."

    class _Interpreted(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            name = fullname.removeprefix(prefix)
            if name in modules and fullname != name:
                source = _os.path.join(directory, *name.split(".")) + ".py"
                return importlib.util.spec_from_file_location(fullname, source)
            return None

    sys.meta_path.insert(0, _Interpreted())


def build_of(package: str, modules: tuple[str, ...]) -> str:
    """'compiled' when `package`'s hot modules are the Cython build in use, else 'interpreted'."""
    import importlib.util
    # The module each import would load, found without running it (that would load pyarrow & co.).
    compiled = [(importlib.util.find_spec(f"{package}.{name}").origin or "").endswith((".so", ".pyd"))
                for name in modules]
    return "compiled" if all(compiled) else "interpreted" if not any(compiled) else "partly compiled"


def build() -> str:
    """'compiled' when the hot modules are the Cython build in use, else 'interpreted'."""
    return build_of(__name__, HOT_MODULES)


if _os.environ.get("AMQPCAP_INTERPRETED"):  # the reference: run the .py files even where compiled ones exist
    prefer_sources(__name__, HOT_MODULES)
