"""Spec-driven AMQP 0-9-1 / 0-9 decoding, from capture files to frames and analytics rows. No Spark
here. The hot modules run compiled (Cython) when the package was built with a C compiler, and as
the same Python source otherwise (the reference)."""

__version__ = "0.2.0"

# The modules a C compiler turns into extensions (setup.py): the same .py files, typed by their .pxd.
HOT_MODULES = ("packets", "tcp", "stream", "codec", "fieldtable")


def build() -> str:
    """'compiled' when the hot modules are the Cython build in use, else 'interpreted'."""
    import importlib
    compiled = [importlib.import_module(f"amqp_decode.{name}").__file__.endswith((".so", ".pyd"))
                for name in HOT_MODULES]
    return "compiled" if all(compiled) else "interpreted" if not any(compiled) else "partly compiled"
