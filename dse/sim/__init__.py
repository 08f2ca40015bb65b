"""Evaluation: the validated request (`spec`), the one compiled path (`compiled`), the one event engine
(C and its Python reference), the simulator of one collective, `evaluate`, `evaluate_many` and `Result`."""

from dse import _lazy_submodules

__getattr__ = _lazy_submodules(__name__)
