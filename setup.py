"""Builds the optional C core of the simulator (dse/_csim.c); everything else is in pyproject.toml.

The extension is optional: without a C compiler the install still succeeds and `dse` runs its
pure-Python event loop, with the same results, about 20x slower.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("dse._csim", ["dse/_csim.c"], optional=True, extra_compile_args=["-O2"])])
