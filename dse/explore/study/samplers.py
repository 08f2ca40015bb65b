"""Optuna samplers for dse studies, seeded per trial so that an interrupted study resumes exactly.

An Optuna sampler seeded once draws from one random stream for the life of its process: a study
killed and resumed starts that stream again, so its later trials differ from an uninterrupted
run's. `ResumableSampler` instead builds a fresh sampler for every trial, seeded from the study's
seed and the number of trials complete when the trial is created. What a trial draws then depends
only on the seed and the complete trials before it (all a TPE, NSGA-II, random or brute-force
sampler looks at), so a one-worker study interrupted at any moment and resumed ends with the same
trials, parameters and values as one never interrupted. With several workers the order in which
trials complete, and so what each draws, depends on timing; the total is still exact.

The relative search space (the parameters every finished trial shares, which multivariate TPE and
NSGA-II sample jointly) draws nothing at random, and Optuna works it out incrementally, from the
trials finished since the last call. A sampler built afresh for every trial would work it out from
all the trials each time, so a study of n trials would compare parameters O(n²) times.
`ResumableSampler` therefore asks one long-lived sampler of the
same kind for it, and the per-trial seeded one for everything that draws.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import optuna
from optuna.samplers import BaseSampler

SAMPLERS = ("tpe", "nsga2", "random", "brute_force")


class _BruteForce(optuna.samplers.BruteForceSampler):
    """Optuna's brute force, which calls `study.stop()` once the grid is exhausted; that only works
    inside `optimize`, and dse's workers ask and tell, so they stop on `exhausted`."""

    exhausted = False

    def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
        """Optuna's `after_trial`; a grid exhausted sets `exhausted` instead of stopping the study."""
        try:
            super().after_trial(study, trial, state, values)
        except RuntimeError:
            self.exhausted = True


def _brute_force(seed: int) -> BaseSampler:
    with warnings.catch_warnings():  # experimental in Optuna, and documented as such here
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return _BruteForce(seed=seed)


_FACTORIES: dict[str, Callable[[int], BaseSampler]] = {
    "tpe": lambda seed: optuna.samplers.TPESampler(seed=seed),
    "nsga2": lambda seed: optuna.samplers.NSGAIISampler(seed=seed),
    "random": lambda seed: optuna.samplers.RandomSampler(seed=seed),
    "brute_force": _brute_force,
}


def trial_seed(seed: int, index: int) -> int:
    """The seed of the sampler that draws the trial created after `index` complete trials."""
    return (seed * 1_000_003 + index * 7_919 + 12_345) % 2**32


class ResumableSampler(BaseSampler):
    """A sampler of kind `name` rebuilt for every trial, seeded by `trial_seed(seed, index)`.

    The worker sets `index` (the complete trials) under its lock just before `study.ask()`."""

    def __init__(self, name: str, seed: int) -> None:
        self.name, self.seed = name, seed
        self.index = 0
        self.exhausted = False
        self._inner = _FACTORIES[name](trial_seed(seed, 0))
        self._spaces = _FACTORIES[name](trial_seed(seed, 0))  # long-lived: the relative search space only

    def before_trial(self, study: Any, trial: Any) -> None:
        """Build the trial's own sampler, seeded by `trial_seed(seed, index)`, and pass the call on."""
        self._inner = _FACTORIES[self.name](trial_seed(self.seed, self.index))
        self._inner.before_trial(study, trial)

    def infer_relative_search_space(self, study: Any, trial: Any) -> Any:
        """The relative search space, from the long-lived sampler (module docstring)."""
        return self._spaces.infer_relative_search_space(study, trial)

    def sample_relative(self, study: Any, trial: Any, search_space: Any) -> Any:
        """The trial's sampler's joint draw over `search_space`."""
        return self._inner.sample_relative(study, trial, search_space)

    def sample_independent(self, study: Any, trial: Any, param_name: str, param_distribution: Any) -> Any:
        """The trial's sampler's draw of one parameter."""
        return self._inner.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
        """The trial's sampler's `after_trial`; `exhausted` once a brute-force grid is."""
        self._inner.after_trial(study, trial, state, values)
        self.exhausted = self.exhausted or getattr(self._inner, "exhausted", False)

    def reseed_rng(self) -> None:  # the seeds are fixed by design
        """Nothing: the seeds are fixed by design (`trial_seed`)."""
        pass
