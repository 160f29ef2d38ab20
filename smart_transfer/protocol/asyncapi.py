"""The AsyncAPI 3.0 document of the Smart Transfer Protocol, built from the code that implements it:
payload schemas from the message models, the allowed orderings from the transition tables. The
checked-in ``asyncapi/smart-transfer.asyncapi.yaml`` is this function's output; a test fails when
they differ."""

from __future__ import annotations

import inspect
from typing import Any

import smart_transfer
from smart_transfer.model.multihash import BINARY_LENGTH
from smart_transfer.model.pack import PACK_MAGIC
from smart_transfer.model.schema import block_schemas, manifest_schemas
from smart_transfer.protocol import SUBPROTOCOL
from smart_transfer.protocol import messages as m
from smart_transfer.protocol.codes import HTTP_STATUS, ErrorCode
from smart_transfer.protocol.connection import (
    CLOSE_GOING_AWAY,
    CLOSE_INTERNAL_ERROR,
    CLOSE_MESSAGE_TOO_BIG,
    CLOSE_NORMAL,
    CLOSE_POLICY_VIOLATION,
    CLOSE_TRY_AGAIN_LATER,
    close_code_of,
)
from smart_transfer.protocol.errors import details_model, details_schemas
from smart_transfer.protocol.flows import FLOWS, Sender, messages_of
from smart_transfer.protocol.messages import MessageType, name_of
from smart_transfer.protocol.schemas import schema_components

#: The messages of each flow, in the order its table first names them (``Error`` last).
FLOW_MESSAGES: dict[str, list[MessageType]] = {flow: messages_of(flow) for flow in FLOWS}
TARBALL = name_of(m.MetadataTarball)
TARBALL_DESCRIPTION = {
    "pull": "The server's answer to DatasetPullMetadataRequest: every block of the plan in one pack, oldest first.",
    "push": "The client's new blocks in one pack, oldest first, sent after DatasetPushRequestAccepted.",
}
FLOW_SUMMARY = {
    "pull": "Bring a local dataset up to the remote head; objects are downloaded directly from storage.",
    "push": "Make the remote head the local head; objects are uploaded directly to storage and verified.",
}


def _doc(model: type[Any]) -> str:
    return inspect.cleandoc(model.__doc__ or "").replace("\n", " ")


def _asyncapi_schema(node: Any) -> Any:
    """msgspec writes OpenAPI-style discriminator objects; AsyncAPI schemas want the property name."""
    if isinstance(node, dict):
        out = {k: _asyncapi_schema(v) for k, v in node.items()}
        if isinstance(out.get("discriminator"), dict):
            out["discriminator"] = out["discriminator"]["propertyName"]
        return out
    if isinstance(node, list):
        return [_asyncapi_schema(v) for v in node]
    return node


def ordering(flow: str) -> list[str]:
    """The transition table of ``flow`` as lines: ``phase --sender: Message--> next phase``."""
    return [
        f"{phase.value} --{sender.value}: {name_of(kind)}--> {target.value}"
        for (phase, sender, kind), target in FLOWS[flow].items()
    ]


def _schemas_and_messages() -> tuple[dict[str, Any], dict[str, Any]]:
    """Payload schemas (messages, block formats, error details) and the JSON messages."""
    models = {name_of(kind): kind for kinds in FLOW_MESSAGES.values() for kind in kinds if issubclass(kind, m.Message)}
    schemas = _asyncapi_schema(schema_components(models.values()))
    schemas.update(_asyncapi_schema(block_schemas()))
    schemas.update(_asyncapi_schema(manifest_schemas()))
    schemas.update(_asyncapi_schema(details_schemas()))
    messages: dict[str, Any] = {
        name: {
            "name": name,
            "title": name,
            "summary": _doc(model),
            "contentType": "application/json",
            "payload": {"$ref": f"#/components/schemas/{name}"},
        }
        for name, model in sorted(models.items())
    }
    messages[TARBALL] = _tarball_message()
    return schemas, messages


#: The tarball's manifest entries: format-1 manifests and the pages of paged ones.
_MANIFEST_ENTRY = {
    "name": r"^manifest-f1[26]20[0-9a-f]{64}$",
    "meaning": "after the pack: the manifests of the checkpoints the blocks reference, and the pages of paged "
    "ones, each named by its hash, less what the receiver holds",
    "content": {
        "oneOf": [
            {"$ref": "#/components/schemas/CheckpointManifest"},
            {"$ref": "#/components/schemas/CheckpointManifestPage"},
        ]
    },
}


def _tarball_message() -> dict[str, Any]:
    """The binary frame: a gzip tar of one block pack and the manifests, described entry by entry,
    and the pack byte by byte."""
    return {
        "name": TARBALL,
        "title": "Metadata tarball (binary frame)",
        "summary": "One gzip tar in a binary WebSocket frame: first one 'pack-{pack hash}' entry, a block pack "
        "(x-pack) holding the blocks oldest first; then one 'manifest-{hash}' entry per checkpoint manifest object the "
        "blocks reference (a format-1 manifest, or the pages of a paged one) that the receiver does not hold: the "
        "sender leaves out the pages of the last checkpoint at or before the common block, which the receiver "
        "reads from its own store, so both sides know every checkpoint file before objects are negotiated.",
        "contentType": "application/gzip",
        "payload": {"type": "string", "format": "binary"},
        "x-archive": {
            "compression": "gzip",
            "format": "tar (ustar), regular files only",
            "entries": [
                {
                    "name": r"^pack-f1[26]20[0-9a-f]{64}$",
                    "meaning": "exactly one, first: the block pack (see x-pack) named by its hash; the entry's bytes "
                    "must hash to it (a pack of no blocks when there are none)",
                    "content": "x-pack",
                },
                _MANIFEST_ENTRY,
            ],
        },
        "x-pack": {
            "byteOrder": "big-endian",
            "layout": [
                {"name": "magic", "size": len(PACK_MAGIC), "hex": PACK_MAGIC.hex(), "meaning": repr(PACK_MAGIC)[1:]},
                {"name": "count", "type": "uint32", "meaning": "number of blocks"},
                {
                    "name": "index",
                    "repeat": "count",
                    "fields": [
                        {
                            "name": "hash",
                            "size": BINARY_LENGTH,
                            "meaning": "the block's multihash in binary: code (0x12 sha2-256, 0x16 sha3-256), length "
                            "0x20, digest; its text form elsewhere in this document is 'f' and these bytes in hex",
                        },
                        {"name": "size", "type": "uint32", "meaning": "the block's length in bytes"},
                    ],
                },
                {
                    "name": "blocks",
                    "meaning": "every block's canonical bytes, concatenated in index order (oldest block first); "
                    "each must hash to its index entry, and nothing may follow the last",
                    "content": {"$ref": "#/components/schemas/MetadataBlock"},
                },
            ],
        },
    }


def _channels_and_operations() -> tuple[dict[str, Any], dict[str, Any]]:
    """One channel per flow, with its order written out, and who sends what."""
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    for flow, flow_models in FLOW_MESSAGES.items():
        names = [name_of(kind) for kind in flow_models]
        channels[flow] = {
            "address": f"/{{dataset}}/{flow}",
            "title": f"{flow} session",
            "summary": FLOW_SUMMARY[flow],
            "description": "One session per operation. Allowed order (phase --sender: message--> next "
            "phase); any other message ends the session with Error{code: UnexpectedMessage}, and an "
            "Error from either side ends it in phase Failed:\n\n"
            + "\n".join(f"- {line}" for line in ordering(flow))
            + f"\n\n{TARBALL}: {TARBALL_DESCRIPTION[flow]}",
            "parameters": {"dataset": {"description": "dataset name: ASCII letters and digits joined by - . _"}},
            "messages": {name: {"$ref": f"#/components/messages/{name}"} for name in names},
            "bindings": {"ws": {"method": "GET", "headers": HANDSHAKE_HEADERS, "bindingVersion": "0.1.0"}},
        }
        for sender, action in ((Sender.CLIENT, "receive"), (Sender.SERVER, "send")):
            sent = sorted({name_of(kind) for (_, who, kind) in FLOWS[flow] if who is sender} | {name_of(m.Error)})
            operations[f"{flow}{sender.value.capitalize()}Messages"] = {
                "action": action,
                "channel": {"$ref": f"#/channels/{flow}"},
                "summary": f"Messages the {sender.value} sends in a {flow} session "
                f"(the server {'receives' if action == 'receive' else 'sends'} them).",
                "messages": [{"$ref": f"#/channels/{flow}/messages/{name}"} for name in sent],
            }
    return channels, operations


def build_document() -> dict[str, Any]:
    """The whole AsyncAPI document as plain data."""
    schemas, messages = _schemas_and_messages()
    channels, operations = _channels_and_operations()
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "smart-transfer Smart Transfer Protocol",
            "version": smart_transfer.__version__,
            "description": "Duplex WebSocket sessions for pulling and pushing datasets (after the Open Data "
            "Fabric Smart Transfer Protocol RFC). The server negotiates metadata and hands out short-lived "
            "presigned URLs; object bytes move directly between clients and storage. WebSocket subprotocol: "
            f"'{SUBPROTOCOL}' (the RFC's 'odf/smart-transfer-protocol/v1' is not a valid RFC 6455 token). "
            "Optional 'Authorization: Bearer <token>' header. JSON messages are text frames tagged by 'type'. "
            "A partial pull is the client's choice alone: the metadata tarball always carries the whole chain "
            "(every block and checkpoint manifest after begin_after), and the client then asks, in "
            "DatasetPullObjectsTransferRequest pages, for the URLs of only the objects it wants (the latest "
            "checkpoint's files, the data slices of a range of blocks, a time or the last N records, or none); "
            "the server neither knows nor records the selection, so a server that predates partial pulls "
            "serves them unchanged.",
        },
        "defaultContentType": "application/json",
        "servers": {
            "local": {
                "host": "127.0.0.1:8080",
                "protocol": "ws",
                "description": "make serve (embedded store)",
            }
        },
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages, "schemas": schemas},
        "x-close-codes": {str(code): meaning for code, meaning in CLOSE_CODES.items()},
        "x-error-codes": {
            code.value: {
                "closeCode": close_code_of(code),
                "httpStatus": HTTP_STATUS[code],
                "details": {"$ref": f"#/components/schemas/{details_model(code).__name__}"},
            }
            for code in ErrorCode
        },
    }


#: What each close code means (the reason is the error code, when there is one).
CLOSE_CODES = {
    CLOSE_NORMAL: "the session ended as the table says (after DatasetPullComplete, DatasetPushCompleteConfirmed, "
    "or in answer to the peer's Error)",
    CLOSE_GOING_AWAY: "an Error: ShuttingDown, the server is stopping (run the operation again)",
    CLOSE_POLICY_VIOLATION: "an Error the peer caused (bad or misplaced message, refused request)",
    CLOSE_MESSAGE_TOO_BIG: "an Error: a frame was over the limit (MessageTooLarge)",
    CLOSE_INTERNAL_ERROR: "an Error the server caused (Internal, StorageUnavailable)",
    CLOSE_TRY_AGAIN_LATER: "an Error: Busy, retry after details.retry_after seconds",
}
#: The handshake headers of both channels.
HANDSHAKE_HEADERS: dict[str, Any] = {
    "type": "object",
    "required": ["Sec-WebSocket-Protocol"],
    "properties": {
        "Sec-WebSocket-Protocol": {"const": SUBPROTOCOL, "description": "the subprotocol to offer (required)"},
        "Authorization": {
            "type": "string",
            "pattern": "^Bearer .+$",
            "description": "a token, when the server needs one",
        },
    },
}
