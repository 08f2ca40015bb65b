"""Chakra execution traces, ASTRA-sim 2.x's workload format: the schema (`schema`), bounded
decompression and framing (`frames`), the messages decoded one at a time (`messages`), the reader
(`read`, with `nodes`: trace nodes to graph nodes, `link`: their dependencies, `digests`: the other
rank files compared) and the writer
(`write`); and the per-rank replay of a trace set: every rank file (`rankset`), a group's dimensions
(`group_scope`), what each piece costs (`ranks_costs`), one rank per set that runs alike
(`ranks_classes`), collectives whose members issue apart (`ranks_apart`), the event loop
(`ranks_sim`), the entry point (`ranks_run`, `iterate_ranks`) and its result (`ranks_result`).

A new trace node kind is read in `nodes` (for one rank) and costed in `ranks_costs` (per rank).
"""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
