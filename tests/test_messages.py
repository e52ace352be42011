"""Every message type round-trips through msgspec JSON (msgspec validates only on decode)."""

from __future__ import annotations

import enum
import inspect
import typing

import msgspec
import pytest

from swapos.data.prefix import PrefixState
from swapos.data.sampling import SamplingParams
from swapos.data.task import Task, TaskMeta
from swapos.messages import commands, events
from swapos.messages.base import Message
from swapos.messages.inboxes import (
    ClientInbox,
    EvictorInbox,
    GeneratorInbox,
    KVCacheInbox,
    LoaderInbox,
    PrefetcherInbox,
    RecorderInbox,
    RouterInbox,
)


def _all_message_types() -> list[type[Message]]:
    found: list[type[Message]] = []
    for module in (commands, events):
        for _, obj in inspect.getmembers(module, inspect.isclass):
            ours = issubclass(obj, Message) and obj.__module__ == module.__name__
            if ours and obj is not events.Event:
                found.append(obj)
    return found


SAMPLES: dict[type, object] = {
    str: "x",
    int: 3,
    float: 1.5,
    bool: True,
    bytes: b"\x00\x01",
    SamplingParams: SamplingParams(max_tokens=8, stop=("\n",)),
    PrefixState: PrefixState(tokens=(1, 2), state=b"kv"),
    Task: Task(
        meta=TaskMeta(task_id="t", category="bugfix"),
        root="",
        problem="p",
        starter="s",
        tests={"test_x.py": "def test(): pass"},
    ),
}


def _sample(tp: object) -> object:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp in SAMPLES:
        return SAMPLES[tp]  # type: ignore[index]
    if origin is typing.Literal:
        return args[0]
    if origin in (typing.Union, __import__("types").UnionType):
        return _sample(next(a for a in args if a is not type(None)))
    if origin is list:
        return [_sample(args[0])]
    if origin is tuple:
        return (_sample(args[0]),)
    if origin is dict:
        return {_sample(args[0]): _sample(args[1])}
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return _build(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return list(tp)[-1]
    raise AssertionError(f"no sample for {tp!r}")


def _build(cls: type) -> object:
    hints = typing.get_type_hints(cls)
    fields = msgspec.structs.fields(cls)
    return cls(**{f.name: _sample(hints[f.name]) for f in fields})


@pytest.mark.parametrize("cls", _all_message_types(), ids=lambda c: c.__name__)
def test_message_round_trips_through_json(cls: type[Message]) -> None:
    msg = _build(cls)
    data = msgspec.json.encode(msg)
    assert msgspec.json.decode(data, type=cls) == msg
    assert msgspec.json.decode(data)["type"] == cls.__name__


def test_every_inbox_union_decodes_its_members() -> None:
    for union in (
        ClientInbox,
        EvictorInbox,
        GeneratorInbox,
        KVCacheInbox,
        LoaderInbox,
        PrefetcherInbox,
        RecorderInbox,
        RouterInbox,
    ):
        for cls in typing.get_args(union):
            msg = _build(cls)
            assert msgspec.json.decode(msgspec.json.encode(msg), type=union) == msg


def test_there_are_messages_for_every_actor() -> None:
    assert len(_all_message_types()) > 50


def test_decoding_rejects_a_wrong_type() -> None:
    bad = (
        b'{"type":"ModelLoaded","t":"soon","load_s":1,"speculative":false,'
        b'"estimate_bytes":1,"measured_bytes":1}'
    )
    with pytest.raises(msgspec.ValidationError, match="t"):
        events.EVENT_DECODER.decode(bad)
