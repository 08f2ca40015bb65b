"""NCCL's settings the `nccl` cost model honours, as a cost model's name carries them.

A name is ``nccl[:CALIBRATION][,NCCL_ALGO=A][,NCCL_PROTO=P][,NCCL_MAX_NCHANNELS=N]``: the settings
follow the model (and its calibration) after commas, as a user writes them for NCCL, so that one
string names the same run on the command line (``--cost-model nccl,NCCL_ALGO=ring``), in a sweep's
or a study's ``cost_model`` and in every result's ``cost_model`` column. NCCL_ALGO and NCCL_PROTO
take what NCCL reads: one name, a list (``Ring,Tree``) or an exclusion (``^NVLS``), any case; NCCL
then chooses among those allowed, and so does the model. `NcclEnv.suffix` writes them back in a
fixed order with canonical values, the names allowed in NCCL's order (``NCCL_ALGO=tree,ring``,
``NCCL_PROTO=LL,Simple``; all of them: no setting), so two spellings of one setting name one model.
NCCL's names of algorithms the model has none of (CollNetDirect, CollNetChain, PAT) may appear in a
list or an exclusion and allow nothing. NCCL's per-collective form is read too
(``^NVLS;allreduce:tree,ring``: the first list for every collective, each later one for its own),
held as ``COLL:LIST`` entries for the collectives that do not allow all, in NCCL's order. The
settings apply to the collectives NCCL tunes, not to all-to-all and point-to-point messages, which
NCCL runs as send/receive.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from dse.core.errors import InputError
from dse.costs.nccl.channels import MAX_CHANNELS

#: The settings, in the order `NcclEnv.suffix` writes them.
SETTINGS = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MAX_NCHANNELS")
_ALGOS = {"ring": "ring", "tree": "tree", "nvls": "nvls", "nvlstree": "nvls_tree"}
_PROTOS = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
_ORDER = ("tree", "ring", "nvls", "nvls_tree", "LL", "LL128", "Simple")  # NCCL's (dse.costs.nccl.tables)
_UNMODELLED_ALGOS = ("collnetdirect", "collnetchain", "pat")
#: NCCL's names of the collectives its tuner chooses for (the prefixes of NCCL_ALGO's per-collective
#: form, any case), in NCCL's order, with dse's
_FUNCTIONS = {
    "broadcast": "broadcast",
    "reduce": "reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "allreduce": "all_reduce",
}
_FIRST_SETTING = re.compile(r",\s*NCCL_", re.IGNORECASE)
_NEXT_SETTING = re.compile(r",\s*(?=NCCL_)", re.IGNORECASE)


@dataclass(frozen=True)
class NcclEnv:
    """Algorithms allowed (of tree, ring, nvls, nvls_tree), protocols allowed (of LL, LL128, Simple)
    and channel cap (1-64), each None when NCCL chooses freely. The first two are held canonical
    (`algo_name`, `proto_name`: any form NCCL reads is accepted and rewritten); checked on
    construction (`InputError`)."""

    algo: str | None = None
    proto: str | None = None
    max_channels: int | None = None

    def __post_init__(self) -> None:
        if self.algo is not None:
            object.__setattr__(self, "algo", algo_name(self.algo))
        if self.proto is not None:
            object.__setattr__(self, "proto", proto_name(self.proto))
        mc = self.max_channels
        if mc is not None and (type(mc) is not int or not 1 <= mc <= MAX_CHANNELS):
            raise InputError("NCCL_MAX_NCHANNELS", f"{mc!r} is not a channel count", f"1 to {MAX_CHANNELS}")

    @property
    def forced(self) -> bool:
        """Whether any setting is given."""
        return self.algo is not None or self.proto is not None or self.max_channels is not None

    def suffix(self) -> str:
        """The settings as a model name's tail: ``,NCCL_ALGO=ring,NCCL_PROTO=Simple`` ("" for none)."""
        values = (self.algo, self.proto, self.max_channels)
        return "".join(f",{k}={v}" for k, v in zip(SETTINGS, values) if v is not None)


def algo_name(text: object, field: str = "NCCL_ALGO") -> str | None:
    """NCCL_ALGO's value (one algorithm, a list or an exclusion of Ring, Tree, NVLS, NVLSTree, any
    case, nvls_tree too; per collective as NCCL reads it) as the model holds it: the algorithms
    allowed, in NCCL's order, comma-joined (`_allowed`); None when it allows all. An unknown name or
    collective, or a list that allows none: `InputError` on `field`."""
    return _allowed(text, field, _ALGOS, _UNMODELLED_ALGOS, "ring, tree, nvls, nvls_tree (NVLSTree)")


def proto_name(text: object, field: str = "NCCL_PROTO") -> str | None:
    """NCCL_PROTO's value (one protocol, a list or an exclusion of LL, LL128, Simple; any case) as the
    model holds it, as `algo_name`'s."""
    return _allowed(text, field, _PROTOS, (), "LL, LL128, Simple")


def _allowed(text: object, field: str, names: dict[str, str], unmodelled: tuple[str, ...], known: str) -> str | None:
    """NCCL's parse of NCCL_ALGO / NCCL_PROTO (tuning.cc): ``LIST[;COLLECTIVE:LIST]...``, the first
    list for every collective and each later one for its own; the canonical value (module docstring):
    one list when all collectives allow the same, else ``allreduce:tree,ring;broadcast:ring`` for
    those that do not allow all."""
    raw = str(text).strip()
    per: dict[str, tuple[str, ...]] = {}
    everything = tuple(n for n in _ORDER if n in names.values())
    for k, entry in enumerate(raw.split(";")):
        prefix, colon, body = entry.rpartition(":") if ":" in entry else ("", "", entry)
        key = prefix.strip().lower().replace("_", "")
        if colon and key not in _FUNCTIONS:
            raise InputError(field, f"unknown collective {prefix.strip()!r} in {raw!r}", ", ".join(_FUNCTIONS))
        if not colon and k:
            raise InputError(field, f"{raw!r}: only the first entry may leave out its collective", "COLL:LIST")
        chosen = _one_list(body, field, names, unmodelled, known, everything)
        per.update({f: chosen for f in ([key] if colon else _FUNCTIONS)})
    per = {f: per.get(f, everything) for f in _FUNCTIONS}
    if len(set(per.values())) == 1:  # one list for every collective
        return None if per["allreduce"] == everything else ",".join(per["allreduce"])
    return ";".join(f"{f}:{','.join(v)}" for f, v in per.items() if v != everything)


def _one_list(
    text: str, field: str, names: dict[str, str], unmodelled: tuple[str, ...], known: str, everything: tuple[str, ...]
) -> tuple[str, ...]:
    """One list (``Ring,Tree``) or exclusion (``^NVLS``): the names it allows, in NCCL's order."""
    body = text.strip()
    exclude = body.startswith("^")
    given: set[str] = set()
    for item in body.removeprefix("^").split(","):
        key = item.strip().lower().replace("_", "")
        if key not in names and key not in unmodelled:
            raise InputError(field, f"unknown {'algorithm' if unmodelled else 'protocol'} {item.strip()!r}", known)
        given |= {names[key]} if key in names else set()
    chosen = tuple(n for n in everything if (n in given) != exclude)
    if not chosen:
        raise InputError(field, f"{body!r} allows none the model runs", known)
    return chosen


@lru_cache(maxsize=256)
def allowed(value: str | None, collective: str = "all_reduce") -> frozenset[str] | None:
    """The names a canonical NCCL_ALGO or NCCL_PROTO value (`algo_name`, `proto_name`) allows for
    `collective` (dse's name); None: all (no setting, or none for this collective: all-to-all)."""
    if value is None:
        return None
    if ":" not in value:
        return frozenset(value.split(","))
    for entry in value.split(";"):
        function, _, listed = entry.partition(":")
        if _FUNCTIONS[function] == collective:
            return frozenset(listed.split(","))
    return None


def split_settings(name: str) -> tuple[str, NcclEnv]:
    """``nccl:X,NCCL_ALGO=ring`` as (``nccl:X``, its `NcclEnv`): the settings start at the first
    comma followed by ``NCCL_``. An unknown or repeated setting, a bad value or anything else after
    that comma is one `InputError` on ``cost_model``."""
    found = _FIRST_SETTING.search(name)
    if found is None:
        return name, NcclEnv()
    return name[: found.start()].rstrip(), parse_settings(name[found.start() + 1 :], "cost_model")


def parse_settings(text: str, field: str) -> NcclEnv:
    """``NCCL_ALGO=ring,NCCL_PROTO=Simple`` as its `NcclEnv`. An unknown or repeated setting or a bad
    value is one `InputError` (on `field` for the form)."""
    given: dict[str, str] = {}
    for item in _NEXT_SETTING.split(text):
        key, eq, value = (part.strip() for part in item.partition("="))
        key = key.upper()
        if key not in SETTINGS or not eq or not value:
            allowed = ", ".join(f"{s}=..." for s in SETTINGS)
            raise InputError(field, f"{item.strip()!r} is not an NCCL setting", allowed)
        if key in given:
            raise InputError(field, f"{key} given twice", "each setting once")
        given[key] = value
    channels = given.get("NCCL_MAX_NCHANNELS")
    if channels is not None and not channels.isdigit():
        raise InputError("NCCL_MAX_NCHANNELS", f"{channels!r} is not a channel count", f"1 to {MAX_CHANNELS}")
    env = NcclEnv(
        algo=algo_name(given["NCCL_ALGO"]) if "NCCL_ALGO" in given else None,
        proto=proto_name(given["NCCL_PROTO"]) if "NCCL_PROTO" in given else None,
        max_channels=int(channels) if channels is not None else None,
    )
    return env


def logged_env(settings: Sequence[tuple[str, str, int]], source: str, given: NcclEnv | None = None) -> NcclEnv:
    """The `NcclEnv` a test ran with: the settings its log shows ((name, value as written, line), as
    `dse.costs.nccl.logs.NcclTestsRun.settings`; NCCL_NVLS_ENABLE is the machine's and not read
    here), the caller's `given` ones where the log says nothing. A value the model cannot take (a
    per-collective form, an unknown name, a list that allows none it runs), one setting with two
    values, or a value `given` contradicts: `InputError` naming `source` and the line."""
    base = given or NcclEnv()
    fields = {"NCCL_ALGO": "algo", "NCCL_PROTO": "proto", "NCCL_MAX_NCHANNELS": "max_channels"}
    values: dict[str, object] = {}
    for name, text, line in settings:
        if name not in fields:
            continue  # NCCL_NVLS_ENABLE: the machine's, not a forced choice
        where = f"{source}:{line}"
        value = _logged_value(name, text, where)
        if values.get(name, value) != value:
            raise InputError(where, f"the log sets {name} twice ({values[name]} and {value})", "one value a test")
        chosen = getattr(base, fields[name])
        if chosen is not None and chosen != value:
            raise InputError(where, f"the log sets {name}={text}, but {chosen} was given", f"{name}={value}, or none")
        values[name] = value
    return NcclEnv(**{fields[k]: values.get(k, getattr(base, fields[k])) for k in SETTINGS})  # type: ignore[arg-type]


def _logged_value(name: str, text: str, where: str) -> object:
    """One logged setting's value as `NcclEnv` holds it; `InputError` on `where` if the model has none."""
    try:
        if name == "NCCL_ALGO":
            return algo_name(text, where)
        if name == "NCCL_PROTO":
            return proto_name(text, where)
        if text.isdigit() and 1 <= int(text) <= MAX_CHANNELS:
            return int(text)
        raise InputError(where, f"NCCL_MAX_NCHANNELS={text!r} is not a channel count", f"1 to {MAX_CHANNELS}")
    except InputError as e:
        raise InputError(where, f"the log sets {name}={text}, which the model cannot force", e.allowed) from None
