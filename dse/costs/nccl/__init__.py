"""NCCL on real GPU machines (docs/model.md §15): the closed-form model of NCCL's collectives, its
constant tables, the reader of nccl-tests logs, the calibration fit and the measured machines.

`model` predicts what nccl-tests prints for a system (`NcclSystem`) and parameters (`NcclParams`);
`system` turns a dse topology into a system; `logs` reads nccl-tests output; `fit` calibrates the
parameters on it. A new algorithm goes into `model` (its latency in `_latency_ns`, its tiers in
`_tiers`) and NCCL's constants for it into `tables`.
"""
