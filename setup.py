"""The package's build: pure Python (pyproject.toml says what), plus the hot modules compiled by
Cython when a C compiler is there: the same .py files, typed by the .pxd files beside them (pure
Python mode), so the interpreted modules stay the reference. Without a compiler (or Cython), the
build says so once and installs the interpreted modules; `amqpcap --version` tells which is in use.
AMQPCAP_NO_COMPILE=1 builds without compiling; AMQPCAP_SHARED_UTILITY=0 and AMQPCAP_PYTHON_CFLAGS=1
build as before (Cython's utility code in every module, Python's own -g -O3), to compare. A module
not compiled by this build loses the extension an earlier in-place build left beside it (it would
still be imported, running old code).
"""

import ast
import glob
import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


# The package whose __init__.py declares HOT_MODULES: the modules compiled.
PACKAGE = "amqpcap"
# Cython's utility code (its helpers for calls, errors, type checks...), compiled once into this
# module rather than into every hot module: the generated C shrinks by a third.
SHARED_UTILITY = "amqpcap._cyutility"
# Added to Python's own compile flags (-g -O3 here), later flags winning: no debug information
# (a third of the compile time, and never shipped in a wheel's use) and -O2 rather than -O3 (a
# fifth of what is left). Measured in the closing note of issue 56: build and decode speed.
COMPILE_ARGS = ("-g0", "-O2")


def hot_modules() -> list[str]:
    """The package's HOT_MODULES, read without importing it (one declaration)."""
    with open(os.path.join(HERE, PACKAGE, "__init__.py")) as f:
        tree = ast.parse(f.read())
    declared = [node.value for node in tree.body if isinstance(node, ast.Assign)
                and getattr(node.targets[0], "id", None) == "HOT_MODULES"]
    if not declared:
        raise RuntimeError(f"{PACKAGE}/__init__.py declares no HOT_MODULES")
    return [f"{PACKAGE}/{name.replace('.', '/')}.py" for name in ast.literal_eval(declared[0])]


def say(message: str) -> None:
    print(f"amqpcap: {message}", file=sys.stderr)


def remove_stale(modules: list[str]) -> None:
    """Extensions an earlier in-place build (pip install -e) left beside these .py files, which this
    build does not remake: Python would import them rather than the .py, running old code while
    `amqpcap --version` says "compiled"."""
    stale = []
    for module in modules:
        stem = os.path.join(HERE, module.removesuffix(".py"))
        stale += glob.glob(stem + ".so") + glob.glob(stem + ".*.so") + glob.glob(stem + ".*.pyd")
    for path in stale:
        os.remove(path)
    if stale:
        say(f"removed {len(stale)} compiled module(s) an earlier build left, so that the interpreted ones run: "
            + ", ".join(sorted(os.path.relpath(path, HERE) for path in stale)))


class OptionalBuildExt(build_ext):
    """A failed compilation is not a failed install: the interpreted modules are used instead.
    Modules compile in parallel, one per core (the serial build took minutes)."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def run(self):
        try:
            super().run()
        except Exception as error:  # no compiler at all
            say(f"the hot path could not be compiled ({error}); the interpreted decoder will be used")
            remove_stale(hot_modules())
            return
        shared = [ext for ext in self.extensions if ext.name == SHARED_UTILITY]
        if shared and not os.path.exists(self.get_ext_fullpath(SHARED_UTILITY)):
            # every compiled module imports it: without it, none of them can run
            say(f"{SHARED_UTILITY} could not be compiled; the interpreted decoder will be used")
            remove_stale(hot_modules())

    def build_extension(self, ext):
        if self.compiler.compiler_type == "unix" and not os.environ.get("AMQPCAP_PYTHON_CFLAGS"):
            ext.extra_compile_args = [*ext.extra_compile_args, *COMPILE_ARGS]
        try:
            super().build_extension(ext)
        except Exception as error:
            say(f"{ext.name} could not be compiled ({error}); its interpreted module will be used")
            remove_stale([ext.name.replace(".", "/") + ".py"])


def extensions():
    if os.environ.get("AMQPCAP_NO_COMPILE"):
        say("AMQPCAP_NO_COMPILE is set: the interpreted decoder will be used")
        remove_stale(hot_modules())
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        say("Cython is not installed: the interpreted decoder will be used")
        remove_stale(hot_modules())
        return []
    # Safety: the compiled code parses untrusted bytes; every index stays checked (boundscheck)
    # unless a length check in the same function proves it.
    # Types come from the .pxd files only: the .py annotations are documentation (not enforced).
    directives = {"language_level": 3, "annotation_typing": False, "boundscheck": True, "wraparound": True,
                  "initializedcheck": True,
                  "cdivision": False, "infer_types": True, "binding": False}
    modules: list = hot_modules()
    options = {}
    if os.environ.get("AMQPCAP_SHARED_UTILITY", "1") == "1":
        from setuptools import Extension
        modules = [Extension(SHARED_UTILITY, sources=[SHARED_UTILITY.replace(".", "/") + ".c"]), *modules]
        options["shared_utility_qualified_name"] = SHARED_UTILITY
    try:
        # Translated in parallel too (the C compiles already are, by build_ext): translating the
        # modules one after another took 37 s of a build, 17 s on two cores.
        return cythonize(modules, compiler_directives=directives, quiet=True, nthreads=os.cpu_count() or 1,
                         **options)
    except Exception as error:  # a Cython that cannot translate them: still an install
        say(f"the hot path could not be translated by Cython ({error}); the interpreted decoder will be used")
        remove_stale(hot_modules())
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
