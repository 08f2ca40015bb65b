"""Evaluation: the validated request (`spec`), the one compiled path (`compiled`), the one event engine
(C and its Python reference), the simulator of one collective, `evaluate`, `evaluate_many` and `Result`."""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
