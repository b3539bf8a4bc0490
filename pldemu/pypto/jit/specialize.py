"""From a ``pl.jit`` call to a compiled program: bind, specialise, key, cache, capture.

As pypto's ``JITFunction._resolve_compiled``: the arguments are bound to the entry's signature; tensors
give shapes and dtypes (never contents), scalars are specialised (baked into the program and part of
the key) unless ``pl.RUNTIME`` keeps one a runtime parameter (signature mode only); a ``compile()``
with no tensor reads the shapes from the annotations (signature mode). Dynamic dims are ``None`` in
the key, so calls at other extents share one compiled program. Equal keys give the same object.

The program itself is a :class:`~pldemu.pypto.capture.CapturedProgram` named ``_jit_<entry>`` holding
the entry and every dependency, each with its own file, closure and annotations; the entry's bare
``pl.Tensor`` annotations are specialised from the arguments. A ``@pl.jit`` / ``@pl.jit.incore``
entry (one device, no HOST of its own) gets a HOST that dispatches it once to device 0.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import inspect
import os
import warnings
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from pldemu.pypto.capture import CapturedFunction, CapturedProgram, check_names, single_device_host
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.jit.deps import captured, dependency_order, function_node, source_file
from pldemu.pypto.jit.kinds import JitFunctionLike, JitKind
from pldemu.pypto.types import (
    INT32,
    RUNTIME,
    DynExpr,
    DynVar,
    ScalarAnn,
    TensorAnn,
    bare_tensor,
    dtype_of_array,
)

SAMPLE_EXTENT = 1
"""A dynamic dim's extent in signature mode (the artifact does not depend on it)."""


@dataclasses.dataclass(frozen=True)
class TensorMeta:
    """What a tensor argument contributes: its shape and dtype."""

    shape: tuple[int, ...]
    dtype: Any


@dataclasses.dataclass(frozen=True)
class Binding:
    """A call's arguments bound to the entry's parameters."""

    arguments: Mapping[str, Any]
    tensors: Mapping[str, TensorMeta]
    scalars: Mapping[str, Any]
    """Specialised scalar values (``pl.RUNTIME`` ones are not here)."""
    runtime: frozenset[str]
    signature_mode: bool


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, (int, float, bool))


def _meta(value: Any) -> TensorMeta:
    from pldemu.pypto.execute import as_array

    arr = as_array(value)
    return TensorMeta(tuple(int(d) for d in arr.shape), dtype_of_array(arr))


def _scalar(fn: JitFunctionLike, name: str, value: Any) -> Any:
    """A scalar argument's Python value (a 0-dim tensor too: pypto-lib passes its host scalars so)."""
    from pldemu.pypto.execute import scalar_value

    found = scalar_value(value)
    if found is None:
        raise TypeError(f"@pl.jit function '{fn.__name__}': parameter '{name}' takes a tensor or a scalar "
                        f"(int, float, bool), got {type(value).__name__}")
    return found


def bind(fn: JitFunctionLike, args: Sequence[Any], kwargs: Mapping[str, Any], signature_mode: bool) -> Binding:
    """``args`` / ``kwargs`` bound to ``fn``'s signature and sorted into tensors and scalars."""
    signature = inspect.signature(fn._func)
    try:
        # compile() may leave tensor parameters out (signature mode): bind what is given
        bound = signature.bind_partial(*args, **kwargs) if signature_mode else signature.bind(*args, **kwargs)
    except TypeError as err:
        raise TypeError(f"@pl.jit function '{fn.__name__}': {err}") from None
    bound.apply_defaults()
    anns = captured(fn).annotations
    no_tensor = not any(_is_tensor(v) and not isinstance(anns.get(k), ScalarAnn) for k, v in bound.arguments.items())
    tensors: dict[str, TensorMeta] = {}
    scalars: dict[str, Any] = {}
    runtime: set[str] = set()
    for name, value in bound.arguments.items():
        if value is RUNTIME:
            if not (signature_mode and no_tensor):
                raise TypeError(f"@pl.jit function '{fn.__name__}': parameter '{name}' received pl.RUNTIME, which "
                                "is a compile-time marker rather than a value. It is only accepted by "
                                "annotation-driven signature mode — call compile() or lower() with no tensor "
                                f"arguments and pass it by keyword, e.g. {fn.__name__}.compile({name}=pl.RUNTIME). "
                                f"To run the kernel, pass '{name}' its actual value.")
            runtime.add(name)
        elif _is_tensor(value) and not isinstance(anns.get(name), ScalarAnn):
            tensors[name] = _meta(value)
        else:
            scalars[name] = _scalar(fn, name, value)
    if signature_mode and no_tensor:
        tensors = _from_annotations(fn, anns, list(signature.parameters))
    elif len(bound.arguments) < len(signature.parameters):
        missing = [p for p in signature.parameters if p not in bound.arguments]
        raise TypeError(f"@pl.jit function '{fn.__name__}': missing a required argument: {missing[0]!r}")
    return Binding(dict(bound.arguments), tensors, scalars, frozenset(runtime), signature_mode and no_tensor)


def _from_annotations(fn: JitFunctionLike, anns: Mapping[str, Any], names: Sequence[str]) -> dict[str, TensorMeta]:
    """Signature mode: every tensor parameter's shape from its full annotation (dynamic dims at a
    placeholder extent)."""
    out: dict[str, TensorMeta] = {}
    for name in names:
        ann = anns.get(name)
        if not isinstance(ann, TensorAnn):
            continue
        if ann.dims is None:
            raise TypeError(f"@pl.jit function '{fn.__name__}': compile() without tensor arguments reads the "
                            f"shapes from the annotations, but parameter '{name}' is a bare pl.Tensor: give it "
                            "pl.Tensor[[dims], dtype], or pass sample tensors")
        out[name] = TensorMeta(tuple(SAMPLE_EXTENT if isinstance(d, (DynVar, DynExpr)) else int(d) for d in ann.dims),
                               ann.dtype)
    return out


def _key_shape(meta: TensorMeta, ann: Any) -> tuple[int | None, ...]:
    dims = ann.dims if isinstance(ann, TensorAnn) and ann.dims is not None else ()
    return tuple(None if i < len(dims) and isinstance(dims[i], (DynVar, DynExpr)) else d
                 for i, d in enumerate(meta.shape))


def _source_hash(entry: JitFunctionLike, funcs: Sequence[JitFunctionLike]) -> str:
    """The key's hash of every function's source (the entry's and its dependencies'), once per entry."""
    if "hash" not in entry._memo:
        digest = hashlib.sha256()
        for f in funcs:
            digest.update(ast.dump(function_node(f)).encode())
            digest.update(source_file(f).encode())
        entry._memo["hash"] = digest.hexdigest()
    found: str = entry._memo["hash"]
    return found


def _freeze(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, *((f.name, _freeze(getattr(value, f.name))) for f in dataclasses.fields(value)))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


@dataclasses.dataclass(frozen=True)
class Target:
    """Where a compiled program runs (from ``config=RunConfig(...)``)."""

    platform: str
    distributed: Any
    """The ``DistributedConfig`` (device 0 alone when the config gives none)."""


def target_of(fn: JitFunctionLike, config: Any) -> Target:
    from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
    from pldemu.pypto.surface.runtime import RunConfig

    if config is not None and not isinstance(config, RunConfig):
        raise TypeError(f"@pl.jit function '{fn.__name__}': config= takes a pypto.runtime.RunConfig, got "
                        f"{type(config).__name__}")
    platform = config.platform if config is not None else "a2a3sim"
    dist = config.distributed_config if config is not None else None
    return Target(platform, dist if dist is not None else DistributedConfig(device_ids=[0]))


def compiled_for(fn: JitFunctionLike, args: Sequence[Any], kwargs: Mapping[str, Any], config: Any,
                 signature_mode: bool) -> tuple[Any, list[Any]]:
    """The compiled program for these arguments (cached on ``fn``), and the arguments in parameter order."""
    compiled, binding = _compiled(fn, args, kwargs, config, signature_mode)
    return compiled, list(binding.arguments.values())


def translated_for(fn: JitFunctionLike, args: Sequence[Any], kwargs: Mapping[str, Any], config: Any) -> Any:
    """``fn.compile(...)``: the compiled program, translated now for these arguments (what a call of
    their shapes and values runs; refused constructs raise here, at their line, and that call reuses the
    translation). What compile cannot know is said, not guessed: an :class:`UntranslatedWarning`."""
    compiled, binding = _compiled(fn, args, kwargs, config, signature_mode=True)
    try:
        compiled.translate_ahead(_compile_samples(compiled, binding))
    except FrontendError as err:
        raise err.with_traceback(None) from None
    if compiled.untranslated is not None:
        warnings.warn(f"{compiled.program.name}.compile() did not translate it: {compiled.untranslated}; "
                      "pldemu translates it at the first call, where an unsupported name or construct is "
                      "reported", UntranslatedWarning, stacklevel=3)
    return compiled


class UntranslatedWarning(UserWarning):
    """``compile()`` could not translate the program ahead of its call (signature mode with a dynamic dim
    or a ``pl.RUNTIME`` scalar; sample tensors whose ``NR`` is not the device count)."""


def _compile_samples(compiled: Any, binding: Binding) -> list[Any] | str:
    """The host arguments compile translates for: the sample arguments, or in signature mode what the
    annotations give; a string when a call must tell more."""
    from pldemu.pypto.execute import annotation_samples, rank_count_mismatch

    if binding.signature_mode:
        return annotation_samples(compiled.program, compiled.nranks)
    args = list(binding.arguments.values())
    return rank_count_mismatch(compiled.program, compiled.nranks, args) or args


def _compiled(fn: JitFunctionLike, args: Sequence[Any], kwargs: Mapping[str, Any], config: Any,
              signature_mode: bool) -> tuple[Any, Binding]:
    from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedCompiledProgram

    try:
        target = target_of(fn, config)
        binding = bind(fn, args, kwargs, signature_mode)
        funcs = dependency_order(fn)
        anns = captured(fn).annotations
        key = (_source_hash(fn, funcs),
               tuple(sorted((n, _key_shape(m, anns.get(n)), repr(m.dtype)) for n, m in binding.tensors.items())),
               tuple(sorted(binding.scalars.items())), tuple(sorted(binding.runtime)),
               target.platform, _freeze(target.distributed))
        compiled = fn._cache.get(key)
        if compiled is None:
            prog = program_for(fn, funcs, binding)
            compiled = fn._cache[key] = DistributedCompiledProgram(prog, target.distributed, target.platform,
                                                                   output_dir=jit_output_dir(prog.name))
    except FrontendError as err:
        raise err.with_traceback(None) from None
    return compiled, binding


def lowered_for(fn: JitFunctionLike, args: Sequence[Any], kwargs: Mapping[str, Any], config: Any) -> Any:
    """``fn.lower(...)``: the translated pldemu program for these arguments (signature mode without tensors)."""
    from pldemu.pypto.execute import translate

    try:
        target = target_of(fn, config)
        binding = bind(fn, args, kwargs, signature_mode=True)
        prog = program_for(fn, dependency_order(fn), binding)
        host = prog.host()
        samples = [binding.arguments[p] if p in binding.arguments and not binding.signature_mode
                   else _sample(binding.tensors.get(p), binding.scalars.get(p, 0)) for p in host.params]
        built, _ = translate(prog, len(list(target.distributed.device_ids)), samples)
    except FrontendError as err:
        raise err.with_traceback(None) from None
    return Lowered(built.program)


def _sample(meta: TensorMeta | None, scalar: Any) -> Any:
    return np.zeros(meta.shape, meta.dtype.ir.np) if meta is not None else scalar


@dataclasses.dataclass(frozen=True)
class Lowered:
    """What ``JITFunction.lower`` returns: the pldemu program a call runs (before LowerCompositeOps)."""

    program: Any

    def as_python(self) -> str:
        """pypto's spelling of "show me the program": here, its ``.pld`` text."""
        return str(self)

    def __str__(self) -> str:
        from pldemu.ir import format_program

        return format_program(self.program)


def program_for(entry: JitFunctionLike, funcs: Sequence[JitFunctionLike], binding: Binding) -> CapturedProgram:
    """The captured program ``_jit_<entry>``: every function of the dependency graph, the entry's
    annotations specialised, a HOST added for a single-device entry."""
    functions: dict[str, CapturedFunction] = {}
    names: dict[JitFunctionLike, str] = {}
    for f in funcs:
        found = functions.get(f.__name__)
        if found is not None:
            raise FrontendError(f"two pl.jit functions named {f.__name__!r} in one program ({found.file}:"
                                f"{found.node.lineno} and this one): pypto makes each a method of one class, so "
                                "their names must differ", source_file(f), function_node(f).lineno)
        base = captured(f)
        anns = _specialised(base, binding) if f is entry else base.annotations
        functions[f.__name__] = dataclasses.replace(base, annotations=anns)
        names[f] = f.__name__
    top = functions[entry.__name__]
    if entry._kind is not JitKind.HOST:
        host = single_device_host(top)
        functions[host.name] = host
    prog = CapturedProgram(f"_jit_{entry.__name__}", top.file, functions, top.closure, dict(binding.scalars),
                           names, _foreign_nodes(functions.values(), top.file))
    for fn in functions.values():
        check_names(prog, fn)
    return prog


def _specialised(fn: CapturedFunction, binding: Binding) -> dict[str, Any]:
    """The entry's annotations with bare ``pl.Tensor`` ones filled from the arguments and scalars typed."""
    anns = dict(fn.annotations)
    for name in fn.params:
        ann = anns.get(name)
        meta = binding.tensors.get(name)
        if meta is not None and (ann is None or bare_tensor(ann)):
            base = ann if isinstance(ann, TensorAnn) else TensorAnn(None, None)
            anns[name] = dataclasses.replace(base, dims=meta.shape, dtype=meta.dtype)
        elif meta is None and not isinstance(ann, (ScalarAnn, TensorAnn)):
            anns[name] = ScalarAnn(_scalar_dtype(binding.scalars.get(name)))
    return anns


def _scalar_dtype(value: Any) -> Any:
    from pldemu.pypto.types import FP32

    return FP32 if isinstance(value, float) else INT32


def _foreign_nodes(functions: Any, file: str) -> dict[int, str]:
    return {id(n): fn.file for fn in functions if fn.file != file for n in ast.walk(fn.node)}


def jit_output_dir(program_name: str) -> Path:
    """pypto's ``build_output/<program>_<YYYYmmdd_HHMMSS>`` (under ``$PYPTO_PROG_BUILD_DIR`` when set)."""
    base = os.environ.get("PYPTO_PROG_BUILD_DIR") or "build_output"
    return Path(base) / f"{program_name}_{datetime.now().strftime('%Y%m%d_%H%M%S')}"


__all__ = ["Binding", "Lowered", "TensorMeta", "UntranslatedWarning", "bind", "compiled_for", "jit_output_dir",
           "lowered_for", "program_for", "translated_for"]
