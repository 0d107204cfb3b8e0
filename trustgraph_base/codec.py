"""The one wire codec: dataclass <-> compact JSON bytes.

Encoding omits fields that hold their default value, so messages stay small and older
readers ignore what they do not know; decoding ignores unknown fields and fills missing
ones with defaults.  A value of the wrong type raises :class:`CodecError` naming the path
of the field (``GraphRagResponse.explain_triples[3].s.value``).

Per-class converters are compiled once from the type hints and cached, which keeps a
330-triple explain message well under a millisecond each way.

### Usage example

>>> from trustgraph_base.schema import Term
>>> decode(Term, encode(Term(value="http://x")))
Term(type='i', value='http://x', datatype='', language='', triple=None)
"""

from __future__ import annotations

import base64
import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar, cast

import orjson

T = TypeVar("T")

__all__ = ["CodecError", "encode", "decode", "to_json", "from_json"]


class CodecError(ValueError):
    """A message could not be encoded or decoded; ``path`` names the offending field."""

    def __init__(self, message: str, path: str = ""):
        self.path = path
        self.reason = message
        super().__init__(f"{path}: {message}" if path else message)

    def within(self, prefix: str) -> CodecError:
        """Return the same error with ``prefix`` put in front of its path."""
        if not self.path:
            path = prefix
        elif self.path.startswith("["):
            path = prefix + self.path
        else:
            path = f"{prefix}.{self.path}"
        return CodecError(self.reason, path)


_MISSING = dataclasses.MISSING
_Converter = Callable[[Any], Any]


def _type_name(value: Any) -> str:
    return type(value).__name__


# ---------------------------------------------------------------- scalar converters

def _check_str(v: Any) -> str:
    if type(v) is str:
        return v
    raise CodecError(f"expected str, got {_type_name(v)}")


def _check_bool(v: Any) -> bool:
    if type(v) is bool:
        return v
    raise CodecError(f"expected bool, got {_type_name(v)}")


def _check_int(v: Any) -> int:
    if type(v) is int:
        return v
    raise CodecError(f"expected int, got {_type_name(v)}")


def _check_float(v: Any) -> float:
    t = type(v)
    if t is float:
        if v - v == 0.0:  # finite; JSON has no NaN/Infinity (orjson would write null)
            return cast(float, v)
        raise CodecError(f"expected a finite float, got {v!r}")
    if t is int:
        return float(v)
    raise CodecError(f"expected float, got {_type_name(v)}")


def _encode_bytes(v: Any) -> str:
    if not isinstance(v, (bytes, bytearray)):
        raise CodecError(f"expected bytes, got {_type_name(v)}")
    return base64.b64encode(v).decode("ascii")


def _decode_bytes(v: Any) -> bytes:
    if type(v) is not str:
        raise CodecError(f"expected base64 text, got {_type_name(v)}")
    try:
        return base64.b64decode(v.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as e:
        raise CodecError(f"invalid base64: {e}") from None


def _passthrough(v: Any) -> Any:
    return v


_SCALARS: dict[Any, tuple[_Converter, _Converter]] = {
    str: (_check_str, _check_str),
    bool: (_check_bool, _check_bool),
    int: (_check_int, _check_int),
    float: (_check_float, _check_float),
    bytes: (_encode_bytes, _decode_bytes),
    Any: (_passthrough, _passthrough),
}


# ---------------------------------------------------------------- compilation

_ENCODERS: dict[Any, _Converter] = {}
_DECODERS: dict[Any, _Converter] = {}


def _converters(tp: Any) -> tuple[_Converter, _Converter]:
    """Return (encoder, decoder) for a type annotation, compiling and caching it."""
    enc = _ENCODERS.get(tp)
    if enc is not None:
        return enc, _DECODERS[tp]
    if tp in _SCALARS:
        enc, dec = _SCALARS[tp]
    elif isinstance(tp, type) and dataclasses.is_dataclass(tp):
        # Register lazy trampolines first so recursive types (Term -> Triple -> Term) work.
        _ENCODERS[tp] = lambda v: _ENCODERS_REAL[tp](v)
        _DECODERS[tp] = lambda v: _DECODERS_REAL[tp](v)
        enc, dec = _compile_dataclass(tp)
        _ENCODERS_REAL[tp], _DECODERS_REAL[tp] = enc, dec
    else:
        enc, dec = _compile_generic(tp)
    _ENCODERS[tp], _DECODERS[tp] = enc, dec
    return enc, dec


_ENCODERS_REAL: dict[Any, _Converter] = {}
_DECODERS_REAL: dict[Any, _Converter] = {}


def _compile_generic(tp: Any) -> tuple[_Converter, _Converter]:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"codec supports only Optional[X] unions, not {tp}")
        ienc, idec = _converters(inner[0])

        def enc_opt(v: Any) -> Any:
            return None if v is None else ienc(v)

        def dec_opt(v: Any) -> Any:
            return None if v is None else idec(v)

        return enc_opt, dec_opt
    if origin is list:
        (item,) = args or (Any,)
        ienc, idec = _converters(item)

        def enc_list(v: Any) -> list[Any]:
            if not isinstance(v, (list, tuple)):
                raise CodecError(f"expected list, got {_type_name(v)}")
            out = []
            for i, x in enumerate(v):
                try:
                    out.append(ienc(x))
                except CodecError as e:
                    raise e.within(f"[{i}]") from None
            return out

        def dec_list(v: Any) -> list[Any]:
            if type(v) is not list:
                raise CodecError(f"expected list, got {_type_name(v)}")
            try:
                return [idec(x) for x in v]
            except CodecError:
                for i, x in enumerate(v):
                    try:
                        idec(x)
                    except CodecError as e:
                        raise e.within(f"[{i}]") from None
                raise

        return enc_list, dec_list
    if origin is dict:
        key, val = args or (str, Any)
        if key is not str:
            raise TypeError(f"codec supports only dict[str, X], not {tp}")
        venc, vdec = _converters(val)

        def enc_dict(v: Any) -> dict[str, Any]:
            if not isinstance(v, dict):
                raise CodecError(f"expected dict, got {_type_name(v)}")
            out = {}
            for k, x in v.items():
                if type(k) is not str:
                    raise CodecError(f"expected str key, got {_type_name(k)}")
                try:
                    out[k] = venc(x)
                except CodecError as e:
                    raise e.within(f"[{k!r}]") from None
            return out

        def dec_dict(v: Any) -> dict[str, Any]:
            if type(v) is not dict:
                raise CodecError(f"expected object, got {_type_name(v)}")
            out = {}
            for k, x in v.items():
                try:
                    out[k] = vdec(x)
                except CodecError as e:
                    raise e.within(f"[{k!r}]") from None
            return out

        return enc_dict, dec_dict
    raise TypeError(f"codec cannot handle type {tp!r}")


def _optional_inner(tp: Any) -> Any:
    """``X`` for ``X | None`` (when X is not itself a union), else ``None``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(inner) == 1 and len(typing.get_args(tp)) == 2:
            return inner[0]
    return None


_INLINE_CHECKS = {
    str: "type(v) is not str",
    bool: "type(v) is not bool",
    int: "type(v) is not int",
}


def _compile_dataclass(cls: type) -> tuple[_Converter, _Converter]:
    """Generate straight-line encode/decode functions for one dataclass.

    Scalar fields are checked inline; other fields call their cached converters.  The
    generated code is what makes large trace messages cheap to encode and decode.
    """
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    env: dict[str, Any] = {"CodecError": CodecError, "_type_name": _type_name, "cls": cls,
                           "_MISSING": _MISSING}
    enc_lines = ["def encode_dc(obj):",
                 "    if type(obj) is not cls and not isinstance(obj, cls):",
                 f"        raise CodecError('expected {cls.__name__}, got ' + _type_name(obj))",
                 "    out = {}"]
    dec_lines = ["def decode_dc(d):",
                 "    if type(d) is not dict:",
                 f"        raise CodecError('expected object for {cls.__name__}, got ' + _type_name(d))",
                 "    get = d.get"]
    args = []
    for i, f in enumerate(fields):
        tp = hints[f.name]
        name = f.name
        optional = _optional_inner(tp)
        enc, dec = _converters(optional if optional is not None else tp)
        env[f"enc{i}"], env[f"dec{i}"] = enc, dec
        has_default = f.default is not _MISSING
        if has_default:
            env[f"default{i}"] = f.default
        if f.default_factory is not _MISSING:
            env[f"factory{i}"] = f.default_factory
        check = _INLINE_CHECKS.get(tp)
        # -- encoder: skip values equal to the default
        enc_lines.append(f"    v = obj.{name}")
        if has_default and f.default is None:
            skip = "v is not None"
        elif has_default:
            skip = f"v != default{i} or type(v) is not type(default{i})"
        elif f.default_factory is not _MISSING:
            skip = "v or not isinstance(v, (list, dict))"
        else:
            skip = "True"
        enc_lines.append(f"    if {skip}:")
        if check:
            enc_lines.append(f"        if {check}:")
            enc_lines.append(f"            raise CodecError('expected {tp.__name__}, got ' + _type_name(v), {name!r})")
            enc_lines.append(f"        out[{name!r}] = v")
        else:
            enc_lines.append("        try:")
            if optional is not None and not (has_default and f.default is None):
                enc_lines.append(f"            out[{name!r}] = None if v is None else enc{i}(v)")
            else:
                enc_lines.append(f"            out[{name!r}] = enc{i}(v)")
            enc_lines.append("        except CodecError as e:")
            enc_lines.append(f"            raise e.within({name!r}) from None")
        # -- decoder: missing fields take their defaults
        if has_default:
            missing = f"default{i}"
        elif f.default_factory is not _MISSING:
            missing = f"factory{i}()"
        else:
            missing = "_MISSING"
        dec_lines.append(f"    v = get({name!r}, _MISSING)")
        dec_lines.append("    if v is _MISSING:")
        if missing == "_MISSING":
            dec_lines.append(f"        raise CodecError('missing required field', {name!r})")
        else:
            dec_lines.append(f"        v = {missing}")
        dec_lines.append("    else:")
        if check:
            dec_lines.append(f"        if {check}:")
            dec_lines.append(f"            raise CodecError('expected {tp.__name__}, got ' + _type_name(v), {name!r})")
        else:
            dec_lines.append("        try:")
            if optional is not None:
                dec_lines.append(f"            if v is not None: v = dec{i}(v)")
            else:
                dec_lines.append(f"            v = dec{i}(v)")
            dec_lines.append("        except CodecError as e:")
            dec_lines.append(f"            raise e.within({name!r}) from None")
        dec_lines.append(f"    a{i} = v")
        args.append(f"a{i}")
    enc_lines.append("    return out")
    dec_lines.append(f"    return cls({', '.join(args)})")
    code = "\n".join(enc_lines) + "\n\n" + "\n".join(dec_lines) + "\n"
    exec(compile(code, f"<codec {cls.__module__}.{cls.__qualname__}>", "exec"), env)
    return env["encode_dc"], env["decode_dc"]


# ---------------------------------------------------------------- public API

def to_json(obj: Any) -> Any:
    """Convert a dataclass instance to JSON-ready Python values (dicts, lists, scalars)."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise CodecError(f"expected a dataclass instance, got {_type_name(obj)}")
    try:
        return _converters(type(obj))[0](obj)
    except CodecError as e:
        raise e.within(type(obj).__name__) from None


def from_json(cls: type[T], data: Any) -> T:
    """Build a ``cls`` instance from JSON-ready Python values."""
    try:
        return cast(T, _converters(cls)[1](data))
    except CodecError as e:
        raise e.within(cls.__name__) from None


def encode(obj: Any) -> bytes:
    """Encode a dataclass instance as compact UTF-8 JSON bytes."""
    try:
        return orjson.dumps(to_json(obj))
    except orjson.JSONEncodeError as e:  # e.g. unpaired surrogates in text, or too deep
        raise CodecError(f"cannot encode {type(obj).__name__}: {e}") from None
    except RecursionError:
        raise CodecError(f"{type(obj).__name__} nested too deeply to encode") from None


def decode(cls: type[T], data: bytes | str) -> T:
    """Decode JSON bytes into ``cls``; raises :class:`CodecError` on any malformed input."""
    try:
        parsed = orjson.loads(data)
    except (orjson.JSONDecodeError, TypeError) as e:
        raise CodecError(f"not valid JSON for {cls.__name__}: {e}") from None
    except RecursionError:
        raise CodecError(f"JSON nested too deeply for {cls.__name__}") from None
    try:
        return from_json(cls, parsed)
    except RecursionError:
        raise CodecError(f"message nested too deeply for {cls.__name__}") from None
