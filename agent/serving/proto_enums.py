"""The wire's enums ↔ the short lower-case names the agent uses for the same closed sets.

buf's STANDARD rules make every value carry its enum's name as a prefix and make zero ``…_UNSPECIFIED``
(proto/vkocr/v1/*.proto), so ``LimitType.LIMIT_TYPE_MAX`` is the agent's ``"max"``, ``Backend.BACKEND_CPU`` its
``"cpu"`` and ``ServingState.SERVING_STATE_SERVING`` its ``"serving"``; UNSPECIFIED is ``""``: not said.
"""

from __future__ import annotations

from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper


def _descriptor(enum: EnumTypeWrapper | EnumDescriptor) -> EnumDescriptor:
    return enum.DESCRIPTOR if isinstance(enum, EnumTypeWrapper) else enum


def _prefix(desc: EnumDescriptor) -> str:
    """``LIMIT_TYPE_`` of LimitType: its zero value's name less ``UNSPECIFIED``."""
    return desc.values_by_number[0].name.removesuffix("UNSPECIFIED")


def enum_name(enum: EnumTypeWrapper | EnumDescriptor, number: int) -> str:
    """The short name of ``number`` (``LIMIT_TYPE_MAX`` → ``"max"``); ``""`` for UNSPECIFIED. A number the
    enum does not know (proto3 keeps them) raises ValueError."""
    desc = _descriptor(enum)
    value = desc.values_by_number.get(number)
    if value is None:
        raise ValueError(f"{number} is no {desc.name} value; known: {', '.join(choices(desc))}")
    return "" if number == 0 else value.name.removeprefix(_prefix(desc)).lower()


def enum_number(enum: EnumTypeWrapper | EnumDescriptor, name: str) -> int:
    """The number of a short name (``"max"`` → LIMIT_TYPE_MAX); ``""`` is UNSPECIFIED (0). Raises ValueError
    for a name the enum does not have."""
    desc = _descriptor(enum)
    if not name:
        return 0
    value = desc.values_by_name.get(_prefix(desc) + name.upper())
    if value is None or value.number == 0:
        raise ValueError(f"{name!r} is no {desc.name}; say one of {', '.join(choices(desc))}")
    return int(value.number)


def value_name(enum: EnumTypeWrapper | EnumDescriptor, name: str) -> str:
    """The full value name of a short name (``"max"`` → ``"LIMIT_TYPE_MAX"``), as message constructors take
    it; ``""`` is the UNSPECIFIED one. Raises ValueError as ``enum_number``."""
    desc = _descriptor(enum)
    return desc.values_by_number[enum_number(desc, name)].name


def choices(enum: EnumTypeWrapper | EnumDescriptor) -> list[str]:
    """The short names of every value but UNSPECIFIED, in the enum's order."""
    desc = _descriptor(enum)
    return [v.name.removeprefix(_prefix(desc)).lower() for v in desc.values if v.number != 0]


def shown_name(enum: EnumTypeWrapper | EnumDescriptor, number: int) -> str:
    """``enum_name`` for printing a peer's value, which never raises: ``"unspecified"`` for 0, the number
    itself for a value newer than this side's stubs."""
    try:
        return enum_name(enum, number) or "unspecified"
    except ValueError:
        return str(number)
