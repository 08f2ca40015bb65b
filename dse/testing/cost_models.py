"""The cost-model conformance suite: sane phases, order-invariant volume, validation.

Usage (pytest)::

    class TestMine(CostModelConformance):
        @pytest.fixture
        def cost_model(self):
            return MyModel()
"""

from __future__ import annotations

import itertools
import math

import pytest

from dse.core.collectives import ALL_GATHER, ALL_REDUCE, COLLECTIVES, ROOTED, nominal_bytes_sent
from dse.core.errors import InputError
from dse.core.topology import parse_topology

# Links per NPU are given for the models that need them (astra-sim-1); the others ignore them.
TOPOLOGIES = ("Ring(8,50,500,links=2)", "SW(16,200,700,links=4)_FC(4,100,30,links=3)", "4D-Ring_FC_Ring_SW")


class CostModelConformance:
    """Checks every cost model must pass; subclasses provide the `cost_model` fixture."""

    @pytest.fixture
    def cost_model(self):  # pragma: no cover - overridden
        """The cost model under test; a subclass returns its own."""
        raise NotImplementedError

    def test_phases_are_positive_and_keyed(self, cost_model) -> None:
        """Every phase takes time, sends bytes, has a positive key and names one of the dimensions."""
        for spec, coll in itertools.product(TOPOLOGIES, COLLECTIVES):
            t = parse_topology(spec)
            mode = cost_model.check(t, coll, None, 1)
            for order in itertools.permutations(range(t.ndims)):
                for ph in cost_model.phases(t, coll, order, 2**24, latency_mode=mode):
                    assert ph.busy > 0 and ph.delay >= 0 and ph.sent > 0 and ph.key > 0
                    assert 0 <= ph.dim < t.ndims

    def test_volume_does_not_depend_on_order(self, cost_model) -> None:
        """The bytes sent over all phases are the collective's nominal volume in every dimension order."""
        for spec, coll in itertools.product(TOPOLOGIES, COLLECTIVES):
            t = parse_topology(spec)
            mode = cost_model.check(t, coll, None, 1)
            size = 2**24 * t.npus  # divisible all the way down
            want = nominal_bytes_sent(coll, size, t.shape, ag_input_shard=cost_model.rules.ag_input_shard)
            for order in itertools.permutations(range(t.ndims)):
                got = sum(ph.sent for ph in cost_model.phases(t, coll, order, size, latency_mode=mode))
                assert math.isclose(got, want, rel_tol=1e-12), (spec, coll, order)

    def test_chunking_covers_the_size(self, cost_model) -> None:
        """The chunks cover the whole size, with one charge per chunk."""
        t = parse_topology(TOPOLOGIES[1])
        for coll, size, chunks in itertools.product((ALL_REDUCE, ALL_GATHER), (10**6, 2**20 + 3), (1, 7, 64)):
            for baseline in (False, True):
                plan = cost_model.chunking(coll, size, chunks, t, baseline=baseline)
                assert sum(plan.sizes) >= size * (1 - 1e-12)
                assert len(plan.sizes) == len(plan.charges) >= 1

    def test_bandwidth_time_grows_with_bytes(self, cost_model) -> None:
        """A phase of more bytes takes longer on every dimension."""
        t = parse_topology(TOPOLOGIES[1])
        for dim in t.dims:
            for kind in ("RS", "AG"):
                assert 0 < cost_model.bandwidth_time(dim, kind, 1000) < cost_model.bandwidth_time(dim, kind, 2000)

    def test_unknown_latency_mode_is_rejected(self, cost_model) -> None:
        """An unknown latency mode is an `InputError`."""
        with pytest.raises(InputError):
            cost_model.check(parse_topology(TOPOLOGIES[0]), ALL_REDUCE, "sometimes", 1)

    def test_rooted_collectives_are_refused_without_a_closed_form(self, cost_model) -> None:
        """Broadcast and reduce have no chunk phases: a model without a closed form refuses them in
        `check`, naming the collectives it runs; one that declares them checks them like the rest."""
        t = parse_topology(TOPOLOGIES[1])
        for coll in ROOTED:
            if cost_model.closed_form and cost_model.rooted_collectives:
                cost_model.check(t, coll, None, 1)
                continue
            with pytest.raises(InputError, match="all_reduce") as e:
                cost_model.check(t, coll, None, 1)
            assert e.value.field == "collective"
