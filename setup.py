"""Builds the optional C engine (dse/_engine.c, its entry, batch and cost kernels); the rest is in pyproject.toml.

The extension is optional: without a C compiler the install still succeeds and `dse` runs the
pure-Python reference engine (dse/engine_ref.py), with the same results, about 30x slower.
"""

from setuptools import Extension, setup

ENGINE = Extension(
    "dse._engine",
    ["dse/_engine.c", "dse/_graph.c", "dse/_heaps.c", "dse/_queues.c", "dse/_engine_mod.c", "dse/_batch.c", "dse/_kernels.c"],
    depends=["dse/_engine.h", "dse/_ranked.h", "dse/_batch.h"],
    optional=True,
    extra_compile_args=["-O2"],
)
setup(ext_modules=[ENGINE])
