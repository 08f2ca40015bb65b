"""Conformance suites every scheduler and cost model must pass (Optuna's `testing` pattern), and
the fault campaign's checks (`faults`, `interrupts`, and the `faults_*` modules' ``CAMPAIGN`` tables).

Subclass `SchedulerConformance` or `CostModelConformance` in a test module and provide a fixture
(`make_scheduler` or `cost_model`); pytest then runs every check against your strategy. A new fault
class is a function in a `faults_*` module and a row of its ``CAMPAIGN`` table.
"""
