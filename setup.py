"""Builds the optional C engine (dse/sim/_engine.c, its entry, batch and cost kernels); the rest is in pyproject.toml.

The extension is optional: without a C compiler the install still succeeds and `dse` runs the
pure-Python reference engine (dse/sim/engine_ref.py), with the same results, about 30x slower.
Its C files call each other directly: every symbol but the module's init is hidden
(-fvisibility=hidden), so no call between them goes through the procedure linkage table.
"""

from setuptools import Extension, setup

ENGINE = Extension(
    "dse.sim._engine",
    ["dse/sim/_engine.c", "dse/sim/_events.c", "dse/sim/_convert.c", "dse/sim/_graph.c", "dse/sim/_heaps.c", "dse/sim/_queues.c", "dse/sim/_engine_mod.c", "dse/sim/_batch.c", "dse/sim/_shape.c", "dse/sim/_derive.c", "dse/sim/_trackers.c", "dse/sim/_kernels.c", "dse/sim/_flow.c", "dse/sim/_flow_setup.c", "dse/sim/_validate.c"],
    depends=["dse/sim/_engine.h", "dse/sim/_ranked.h", "dse/sim/_batch.h", "dse/sim/_trackers.h"],
    optional=True,
    extra_compile_args=["-O2", "-fvisibility=hidden"],
)
setup(ext_modules=[ENGINE])
