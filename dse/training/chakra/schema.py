"""Chakra's execution-trace schema (package ``ChakraProtoMsg``), declared here with its field numbers.

A Chakra trace (ASTRA-sim 2.x's workload format) is one file per NPU: a varint length, then a
`GlobalMetadata` message, then a varint length and a `Node` message per node, optionally gzipped.
The schema is built in code with `google.protobuf`'s descriptors (the same message and field
names, numbers and types as MLCommons' `et_def.proto`), so reading a trace needs only the
`protobuf` package, not `mlc-chakra` and its heavy dependencies (HTA, pandas, networkx, pydot).
Only what dse reads is declared (every node type and attribute kind, `IOInfo`): `Tensor` messages
are not.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

NODE_TYPES = (
    "INVALID_NODE",
    "METADATA_NODE",
    "MEM_LOAD_NODE",
    "MEM_STORE_NODE",
    "COMP_NODE",
    "COMM_SEND_NODE",
    "COMM_RECV_NODE",
    "COMM_COLL_NODE",
)
INVALID, METADATA, MEM_LOAD, MEM_STORE, COMP, COMM_SEND, COMM_RECV, COMM_COLL = range(8)
COLLECTIVE_TYPES = (
    "ALL_REDUCE",
    "REDUCE",
    "ALL_GATHER",
    "GATHER",
    "SCATTER",
    "BROADCAST",
    "ALL_TO_ALL",
    "REDUCE_SCATTER",
    "REDUCE_SCATTER_BLOCK",
    "BARRIER",
)
ALL_REDUCE, REDUCE, ALL_GATHER, GATHER, SCATTER, BROADCAST, ALL_TO_ALL, REDUCE_SCATTER, RS_BLOCK, BARRIER = range(10)

_F = descriptor_pb2.FieldDescriptorProto
#: the scalar types of `AttributeProto`'s oneof, in field-number order (3, 5, ..., 31); each has a
#: list form one number higher
_SCALARS = (
    ("double", _F.TYPE_DOUBLE),
    ("float", _F.TYPE_FLOAT),
    ("int32", _F.TYPE_INT32),
    ("int64", _F.TYPE_INT64),
    ("uint32", _F.TYPE_UINT32),
    ("uint64", _F.TYPE_UINT64),
    ("sint32", _F.TYPE_SINT32),
    ("sint64", _F.TYPE_SINT64),
    ("fixed32", _F.TYPE_FIXED32),
    ("fixed64", _F.TYPE_FIXED64),
    ("sfixed32", _F.TYPE_SFIXED32),
    ("sfixed64", _F.TYPE_SFIXED64),
    ("bool", _F.TYPE_BOOL),
    ("string", _F.TYPE_STRING),
    ("bytes", _F.TYPE_BYTES),
)


def _list_name(kind: str) -> str:
    return kind.capitalize() + "List"  # DoubleList, Uint64List, Sfixed32List, ...


def _field(
    msg: descriptor_pb2.DescriptorProto,
    name: str,
    number: int,
    ftype: int,
    *,
    repeated: bool = False,
    type_name: str = "",
    oneof: int | None = None,
) -> None:
    f = msg.field.add(name=name, number=number, type=ftype)
    f.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
    if type_name:
        f.type_name = f".ChakraProtoMsg.{type_name}"
    if oneof is not None:
        f.oneof_index = oneof


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="dse_chakra_et_def.proto", package="ChakraProtoMsg", syntax="proto3")
    attr = fd.message_type.add(name="AttributeProto")
    _field(attr, "name", 1, _F.TYPE_STRING)
    _field(attr, "doc_string", 2, _F.TYPE_STRING)
    attr.oneof_decl.add(name="value")
    for i, (kind, ftype) in enumerate(_SCALARS):
        _field(attr, f"{kind}_val", 3 + 2 * i, ftype, oneof=0)
        _field(attr, f"{kind}_list", 4 + 2 * i, _F.TYPE_MESSAGE, type_name=_list_name(kind), oneof=0)
    for kind, ftype in _SCALARS:
        lst = fd.message_type.add(name=_list_name(kind))
        _field(lst, "values", 1, ftype, repeated=True)
    meta = fd.message_type.add(name="GlobalMetadata")
    _field(meta, "version", 1, _F.TYPE_STRING)
    _field(meta, "attr", 2, _F.TYPE_MESSAGE, repeated=True, type_name="AttributeProto")
    io = fd.message_type.add(name="IOInfo")
    for i, name in enumerate(("values", "shapes", "types")):
        _field(io, name, i + 1, _F.TYPE_STRING)
    node = fd.message_type.add(name="Node")
    _field(node, "id", 1, _F.TYPE_UINT64)
    _field(node, "name", 2, _F.TYPE_STRING)
    _field(node, "type", 3, _F.TYPE_ENUM, type_name="NodeType")
    _field(node, "ctrl_deps", 4, _F.TYPE_UINT64, repeated=True)
    _field(node, "data_deps", 5, _F.TYPE_UINT64, repeated=True)
    _field(node, "start_time_micros", 6, _F.TYPE_UINT64)
    _field(node, "duration_micros", 7, _F.TYPE_UINT64)
    _field(node, "inputs", 8, _F.TYPE_MESSAGE, type_name="IOInfo")
    _field(node, "outputs", 9, _F.TYPE_MESSAGE, type_name="IOInfo")
    _field(node, "attr", 10, _F.TYPE_MESSAGE, repeated=True, type_name="AttributeProto")
    for name, values in (("NodeType", NODE_TYPES), ("CollectiveCommType", COLLECTIVE_TYPES)):
        enum = fd.enum_type.add(name=name)
        for number, value in enumerate(values):
            enum.value.add(name=value, number=number)
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())
GlobalMetadata = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("ChakraProtoMsg.GlobalMetadata"))
ChakraNode = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("ChakraProtoMsg.Node"))
AttributeProto = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("ChakraProtoMsg.AttributeProto"))
