"""Reading small YAML files (LIBRA's network, cost-model and communicator files) with line numbers.

LIBRA's inputs are YAML mappings of a few keys. `read_yaml_mapping` reads one with PyYAML's safe
loader and keeps, for every top-level key and every key of a nested mapping, the line it stands on,
so that a reader can report a bad value as ``file:line``. A file that is not YAML is one
`InputError` at the line PyYAML names; a key given twice is refused (PyYAML would keep the last).

Size: the file is read by `dse.core.files.read_text` (special files refused, ``DSE_MAX_TEXT_BYTES``),
then refused above a 64th of that limit (`YAML_SHARE`: 1 MiB by default; LIBRA's files are under
2 KB) before it is parsed, since composing YAML nodes costs far more memory and time than the
text they come from. LibYAML's
loader is used when PyYAML has it, the pure-Python one otherwise (the same nodes and marks).
Aliases are not expanded: a constructed alias is the object its anchor built, shared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dse.core.errors import InputError
from dse.core.files import read_text
from dse.core.limits import input_limit, round_up_text

#: the largest YAML file: this share of ``DSE_MAX_TEXT_BYTES`` (module docstring)
YAML_SHARE = 64
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class YamlEntry:
    """One top-level key's value (plain Python), its line (1-based) and, when the value is a
    mapping, the line of each of its keys."""

    value: Any
    line: int
    lines: dict[str, int] = field(default_factory=dict, compare=False)


def _line(node: Any) -> int:
    return int(node.start_mark.line) + 1


def _keys(node: Any, path: str) -> list[tuple[str, int, Any]]:
    """A mapping node's (key, line, value node) triples; a key given twice is an error."""
    seen: dict[str, int] = {}
    out = []
    for knode, vnode in node.value:
        key = str(knode.value)
        if key in seen:
            raise InputError(
                f"{path}:{_line(knode)}: {key}", f"given twice (first on line {seen[key]})", "each key once"
            )
        seen[key] = _line(knode)
        out.append((key, _line(knode), vnode))
    return out


def read_yaml_mapping(path: str | Path, field_name: str) -> dict[str, YamlEntry]:
    """The top-level mapping of a YAML file, key -> `YamlEntry`; errors carry ``file:line``."""
    text = read_text(path, field_name)
    cap = input_limit("text_bytes") // YAML_SHARE
    if len(text) > cap:
        raise InputError(
            f"{path}",
            f"{len(text):,} characters, more than the limit of {cap:,} for a YAML file "
            f"(1/{YAML_SHARE} of the text limit)",
            f"a smaller file; or raise the limit: DSE_MAX_TEXT_BYTES={round_up_text(len(text) * YAML_SHARE)} dse ...",
        )
    try:
        root = yaml.compose(text, Loader=_LOADER)
    except RecursionError:
        raise InputError(f"{path}", "nested too deeply to read", "a YAML mapping of keys to values") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line = int(mark.line) + 1 if mark is not None else 1
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError(f"{path}:{line}", f"not valid YAML: {problem}") from None
    if root is None:
        raise InputError(f"{path}:1", "no keys (an empty file)", "a YAML mapping of keys to values")
    if not isinstance(root, yaml.MappingNode):
        raise InputError(f"{path}:{_line(root)}", "not a mapping of keys to values", "key: value lines")
    constructor = yaml.SafeLoader("")
    entries: dict[str, YamlEntry] = {}
    for key, line, vnode in _keys(root, str(path)):
        try:
            value = constructor.construct_object(vnode, deep=True)
        except RecursionError:
            raise InputError(f"{path}:{_line(vnode)}: {key}", "nested too deeply to read") from None
        except yaml.YAMLError as e:
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise InputError(f"{path}:{_line(vnode)}: {key}", f"not a valid value: {problem}") from None
        lines = {k: ln for k, ln, _ in _keys(vnode, str(path))} if isinstance(vnode, yaml.MappingNode) else {}
        entries[key] = YamlEntry(value, line, lines)
    return entries
