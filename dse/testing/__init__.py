"""Conformance suites every scheduler and cost model must pass (Optuna's `testing` pattern).

Subclass `SchedulerConformance` or `CostModelConformance` in a test module and provide a fixture
(`make_scheduler` or `cost_model`); pytest then runs every check against your strategy.
"""
