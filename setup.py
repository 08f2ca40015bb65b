"""Builds the optional C engine (dse/_engine.c and its entry and batch); everything else is in pyproject.toml.

The extension is optional: without a C compiler the install still succeeds and `dse` runs the
pure-Python reference engine (dse/engine_ref.py), with the same results, about 30x slower.
"""

from setuptools import Extension, setup

ENGINE = Extension(
    "dse._engine",
    ["dse/_engine.c", "dse/_graph.c", "dse/_queues.c", "dse/_engine_mod.c", "dse/_batch.c"],
    depends=["dse/_engine.h", "dse/_ranked.h"],
    optional=True,
    extra_compile_args=["-O2"],
)
setup(ext_modules=[ENGINE])
