"""``ir.compile(prog, ...)`` and the compiled call: bind, project, translate, launch, write back.

One call of a compiled program is one isolated ``mpiexec`` job of ``len(device_ids)`` ranks through
:func:`pldemu.launch` (MPI is never initialised in the calling process). The program travels to the
ranks as a pickled :class:`~pldemu.ir.Program` behind a tiny Python program file, so every statement
keeps its pypto file:line origin in the reports. Out / InOut host tensors are written back in place.
``output_dir`` holds the translated program and, per host-level collective, pldemu's lowered builtin
kernel under ``next_levels/builtin.tensor.<op>__<variant>/``.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pldemu.ir.nodes import NR, Program
from pldemu.lowering.common import LoweringError
from pldemu.pypto.capture import CapturedProgram
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.session import FrontendOptions, current_options
from pldemu.pypto.translate.host import HostProjection
from pldemu.pypto.translate.outline import outline_host_scopes
from pldemu.pypto.translate.program import Built, build
from pldemu.pypto.translate.values import Alloc, HostTensor
from pldemu.pypto.types import DynExpr, DynVar, ScalarAnn, SymInt, TensorAnn, baked, dim_value
from pldemu.runtime.truncation import merge

if TYPE_CHECKING:
    from pldemu.api import RunResult
    from pldemu.job.resources import MemoryEstimate

RANK_DIM = "NR"
"""The dynamic dim pypto's programs use for the rank count: bound, it must equal the device count."""


class ProgramRunError(AssertionError):
    """The job of a compiled call did not end cleanly: races, a deadlock, a failing rank, a ``%`` / ``//``
    whose truncated device value differs from floor semantics. The message is pldemu's report (race pairs,
    wait-for graphs and truncation findings in the program's pypto file:line); ``result``, the job's
    :class:`~pldemu.api.RunResult` (its ``exit_code`` says how the job failed)."""

    def __init__(self, message: str, result: RunResult | None = None) -> None:
        super().__init__(message)
        self.result = result


class TruncationWarning(UserWarning):
    """A ``%`` / ``//`` of device values whose C-truncated value (what the device computes) differs from
    floor semantics, reported as a warning under ``RuntimeOptions.truncation_warn``."""


def as_array(value: Any) -> np.ndarray:
    """The array behind a host tensor (numpy, pldemu's torch stand-in, or real torch), sharing memory."""
    if isinstance(value, np.ndarray):
        return value
    numpy = getattr(value, "numpy", None)
    if callable(numpy):
        try:
            return np.asarray(numpy())
        except TypeError:  # real torch cannot hand out bfloat16 directly
            import ml_dtypes

            return np.asarray(value.view(_torch_int16(value)).numpy()).view(ml_dtypes.bfloat16)
    raise TypeError(f"a host tensor (numpy array or torch tensor) is expected, got {type(value).__name__}")


def _torch_int16(value: Any) -> Any:
    import torch  # type: ignore[import-not-found]

    return torch.int16


def np_dtype(dtype: Any) -> np.dtype[Any]:
    """The numpy dtype of a torch dtype (real torch's or the stand-in's, ``torch.bfloat16`` included)."""
    found = getattr(dtype, "numpy", None)
    if isinstance(found, np.dtype):
        return found
    from pldemu.npdtypes import dtype_named

    name = str(dtype).removeprefix("torch.")
    try:
        return dtype_named({"bool": "bool_", "half": "float16", "float": "float32"}.get(name, name))
    except TypeError:
        raise TypeError(f"not a torch dtype: {dtype!r}") from None


def scalar_value(value: Any) -> Any:
    """A host scalar's Python number: a number, or a one-element (0-dim) tensor, as pypto-lib's harness
    passes its scalars; None for anything else."""
    if isinstance(value, (bool, int, float)):
        return value
    try:
        arr = as_array(value)
    except TypeError:
        return None
    return arr.reshape(()).item() if arr.size == 1 else None


def host_scalar(prog: CapturedProgram, param: str, value: Any) -> Any:
    """A host ``pl.Scalar`` argument's value (:func:`scalar_value`), or an error at the HOST function."""
    found = scalar_value(value)
    if found is None:
        raise prog.error(f"host argument {param} is a pl.Scalar: pass a number (or a one-element tensor), got "
                         f"{type(value).__name__}", prog.host().node)
    return found


def bind_dims(prog: CapturedProgram, arrays: dict[str, np.ndarray]) -> dict[str, int]:
    """Dynamic dims from the host parameters' shapes (a bare ``NR`` directly, ``M * 2`` by solving the
    linear expression); every dim is then checked against the actual shape."""
    host = prog.host()
    env: dict[str, int] = {}
    pending: list[tuple[str, int, Any, int]] = []
    for p in host.params:
        ann = host.annotations.get(p)
        if not isinstance(ann, TensorAnn) or ann.dims is None:
            continue
        shape = arrays[p].shape
        if len(shape) != len(ann.dims):
            raise prog.error(f"host tensor {p} has {len(shape)} dims, its annotation {len(ann.dims)}", host.node)
        for i, (d, n) in enumerate(zip(ann.dims, shape, strict=True)):
            if isinstance(d, DynVar) and d.name not in env:
                env[d.name] = int(n)
            pending.append((p, i, d, int(n)))
    for _p, _i, d, n in pending:
        if isinstance(d, DynExpr) and len(d.free() - env.keys()) == 1:
            (name,) = d.free() - env.keys()
            at0, at1 = d.evaluate({**env, name: 0}), d.evaluate({**env, name: 1})
            if at1 != at0 and (n - at0) % (at1 - at0) == 0:
                env[name] = (n - at0) // (at1 - at0)
    for p, i, d, n in pending:
        try:
            want = dim_value(d, env)
        except KeyError as err:
            raise prog.error(f"host tensor {p}: dim {i} ({d!r}) cannot be bound from the shapes ({err})",
                             host.node) from None
        if want != n:
            said = f"fixes it at {want}" if isinstance(d, int) else f"{d!r} = {want}"
            hint = (" (a leading dim that follows the device count needs pl.dynamic: NR = pl.dynamic(\"NR\"))"
                    if isinstance(d, int) and i == 0 else "")
            raise prog.error(f"host tensor {p}: dim {i} is {n}, its annotation {said}{hint}", host.node)
    return env


@dataclasses.dataclass
class CompiledCall:
    """What one call produced (kept for inspection: ``compiled.last``)."""

    built: Built
    result: Any


def translate(prog: CapturedProgram, nranks: int, args: Sequence[Any],
              resident: frozenset[str] = frozenset()) -> tuple[Built, dict[str, np.ndarray]]:
    """Bind ``args`` to the host parameters and build the program for ``nranks`` ranks (``resident``: the
    parameters whose tensors stay on the devices, see :func:`pldemu.pypto.translate.program.build`)."""
    prog = outline_host_scopes(prog)
    host = prog.host()
    if len(args) != len(host.params):
        raise prog.error(f"{host.name} takes {len(host.params)} host arguments "
                         f"({', '.join(host.params)}), got {len(args)}", host.node)
    env: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    for p, a in zip(host.params, args, strict=True):
        ann = host.annotations.get(p)
        if isinstance(ann, TensorAnn) and not ann.bare:
            try:
                arrays[p] = as_array(a)
            except TypeError as err:
                raise prog.error(f"host argument {p}: {err}", host.node) from None
            env[p] = ann
        elif isinstance(ann, ScalarAnn):
            env[p] = baked(prog.specialized[p]) if p in prog.specialized else host_scalar(prog, p, a)
        else:
            raise prog.error(f"host parameter {p} needs a pl.Tensor[[dims], dtype] or pl.Scalar annotation",
                             host.node)
    dims: dict[str, int] = bind_dims(prog, arrays)
    if RANK_DIM in dims and dims[RANK_DIM] != nranks:
        raise prog.error(f"{RANK_DIM} = {dims[RANK_DIM]} from the host tensors' shapes, but the program runs "
                         f"on {nranks} devices (DistributedConfig.device_ids)", host.node)
    dims[RANK_DIM] = SymInt(nranks, NR)
    for p, a in arrays.items():
        ann = env[p]
        env[p] = HostTensor(p, (), a, ann.dtype, ann.direction, tuple(dim_value(d, dims) for d in ann.dims))
    allocs: dict[int, Alloc] = {}
    created: dict[int, HostTensor] = {}
    events = [HostProjection(prog, dict(env), dims, d, nranks, allocs, created).run(host.node.body)
              for d in range(nranks)]
    for t in created.values():  # HOST pl.create_tensor: host arrays of this call, as the parameters are
        if t.param in arrays:
            raise prog.error(f"pl.create_tensor {t.param}: the name is a host parameter too", host.node)
        arrays[t.param] = t.array
    return build(prog, events, dims, resident), arrays


@dataclasses.dataclass
class TranslationCache:
    """One program's translations by what they depend on: the shapes and dtypes of the call's host tensors,
    its host scalars' values and which parameters are resident (never tensor contents: host control flow
    that depends on them is refused). A prepared worker translates once per kind of call, not per dispatch;
    a hit only slices the call's own tensors into the ranks' inputs."""

    limit: int = 16
    """Kinds of call kept (a call of another kind past the limit is translated, not kept)."""
    entries: dict[tuple[Any, ...], tuple[Built, dict[str, tuple[tuple[int, ...], np.dtype[Any]]]]] = \
        dataclasses.field(default_factory=dict)

    def translate(self, prog: CapturedProgram, nranks: int, args: Sequence[Any],
                  resident: frozenset[str] = frozenset()) -> tuple[Built, dict[str, np.ndarray]]:
        """:func:`translate`, from the cache when a call of this kind was translated before."""
        key = _call_kind(prog, nranks, args, resident)
        hit = self.entries.get(key) if key is not None else None
        if hit is None:
            built, arrays = translate(prog, nranks, args, resident)
            if key is not None and len(self.entries) < self.limit:
                params = set(prog.host().params)
                self.entries[key] = (_without_call_data(built),
                                     {n: (a.shape, a.dtype) for n, a in arrays.items() if n not in params})
            return built, arrays
        built, created = hit
        host = prog.host()
        arrays = {p: as_array(a) for p, a in zip(host.params, args, strict=True)
                  if isinstance(host.annotations.get(p), TensorAnn)}
        arrays.update({n: np.zeros(shape, dtype) for n, (shape, dtype) in created.items()})
        inputs = tuple({**{n: a for n, a in built.inputs[r].items() if n not in mine},
                        **{n: np.ascontiguousarray(arrays[p][k]) for n, (p, k) in mine.items() if p not in resident}}
                       for r, mine in enumerate(built.sources))
        return dataclasses.replace(built, inputs=inputs), arrays


def _without_call_data(built: Built) -> Built:
    """``built`` without the slices of its call's host tensors (a hit takes its own call's): a kept
    translation does not hold a model's inputs alive, nor a compile()'s sample tensors."""
    inputs = tuple({n: a for n, a in inputs.items() if n not in mine}
                   for inputs, mine in zip(built.inputs, built.sources, strict=True))
    return dataclasses.replace(built, inputs=inputs) if built.sources else built


def annotation_samples(prog: CapturedProgram, nranks: int) -> list[Any] | str:
    """Host arguments that stand for any call, read from the host annotations alone (``ir.compile`` of a
    class; ``compile()`` of a ``pl.jit`` function in signature mode): zeros of each tensor's shape with
    ``NR`` the device count, each specialised scalar's value. When a call must still tell something the
    translation depends on (another dynamic dim's extent, a scalar's value), what it is, instead."""
    host = prog.host()
    samples: list[Any] = []
    for p in host.params:
        ann = host.annotations.get(p)
        if isinstance(ann, ScalarAnn):
            if p not in prog.specialized:
                return f"host scalar {p} has no value before a call"
            samples.append(prog.specialized[p])
        elif isinstance(ann, TensorAnn) and ann.dims is not None and ann.dtype is not None:
            try:
                shape = tuple(dim_value(d, {RANK_DIM: nranks}) for d in ann.dims)
            except KeyError as err:
                return f"host tensor {p}: dynamic dim {err.args[0]} has no extent before a call"
            samples.append(np.zeros(shape, ann.dtype.ir.np))
        else:
            samples.append(None)  # translate refuses it, as a call would
    return samples


def rank_count_mismatch(prog: CapturedProgram, nranks: int, args: Sequence[Any]) -> str | None:
    """Sample host tensors (a ``pl.jit`` ``compile()``'s) whose ``NR`` is not the device count, or whose
    shapes the annotations do not give: a call of their shapes is refused, but pypto compiles them (``NR``
    is symbolic; a ``pl.jit`` function's parameter types are regenerated from its arguments), so compile
    does not translate them; what to say instead."""
    host = prog.host()
    arrays = {p: as_array(a) for p, a in zip(host.params, args, strict=False)
              if isinstance(ann := host.annotations.get(p), TensorAnn) and not ann.bare}
    try:
        dims = bind_dims(prog, arrays)
    except FrontendError as err:
        return f"its sample tensors are not of the annotated shapes ({err.message}; a call of these shapes is refused)"
    bound = dims.get(RANK_DIM)
    if bound is None or bound == nranks:
        return None
    return (f"its sample tensors give {RANK_DIM} = {bound}, but it runs on {nranks} devices (a call of these "
            "shapes is refused)")


def _call_kind(prog: CapturedProgram, nranks: int, args: Sequence[Any], resident: frozenset[str]) -> tuple[Any, ...] | None:
    """What a call's translation depends on, or None when some argument cannot be told (never cached)."""
    host = prog.host()
    if len(args) != len(host.params):
        return None
    kind: list[Any] = [nranks, resident]
    for p, a in zip(host.params, args, strict=True):
        ann = host.annotations.get(p)
        if isinstance(ann, ScalarAnn):
            kind.append(("s", scalar_value(a)))
            continue
        try:
            arr = as_array(a)
        except TypeError:
            return None
        kind.append(("t", arr.shape, arr.dtype.str))
    return tuple(kind)


def run(prog: CapturedProgram, nranks: int, args: Sequence[Any], output_dir: Path,
        opts: FrontendOptions | None = None, translations: TranslationCache | None = None) -> CompiledCall:
    """Translate (from ``translations`` when a call of this kind was translated before, by ``compile``
    or an earlier call), write the artifacts, run one job and write Out / InOut tensors back in place."""
    from pldemu.api import launch
    from pldemu.pypto.artifacts import write_artifacts

    opts = opts or current_options()
    built, arrays = (translations or TranslationCache()).translate(prog, nranks, args)
    try:
        program_file = write_artifacts(built, output_dir, opts)
    except LoweringError as err:
        raise _refused(prog, built, err) from None
    if opts.codegen_only:
        return CompiledCall(built, None)
    _check_memory(prog, built, nranks, opts)
    runtime = opts.runtime
    if runtime.invariants:
        # A notify/wait tag may legitimately stay in its cell at the end of a pypto program.
        runtime = dataclasses.replace(runtime, cell_check=False)
    result = launch(program_file, nranks, inputs=list(built.inputs), options=runtime, timeout=opts.timeout,
                    check=False)
    return CompiledCall(built, finish(prog, built, arrays, result))


def memory_estimate(built: Built, nranks: int, opts: FrontendOptions) -> MemoryEstimate:
    """What a call's job would need (buffers, the LOCAL tensors of ``create_tensor`` and ``pl.array``, tiles,
    checker shadows: ``pldemu.job.resources``)."""
    from pldemu.job.precheck import static_buffers
    from pldemu.job.resources import job_memory, tile_bytes

    return job_memory(static_buffers(built.program, nranks).values(), nranks, opts.runtime.race_detect,
                      invariants=opts.runtime.invariants, tiles=tile_bytes(built.program), program=built.program)


def _check_memory(prog: CapturedProgram, built: Built, nranks: int, opts: FrontendOptions) -> None:
    """Refuse, before its job starts, a call whose :func:`memory_estimate` exceeds what this machine has,
    naming the estimate and the biggest buffers; ``opts.force`` runs it anyway."""
    from pldemu.job.resources import ResourceError, check_fits

    try:
        check_fits(memory_estimate(built, nranks, opts), opts.force)
    except ResourceError as err:
        raise prog.error(f"{prog.name} on {nranks} devices: {err} (pldemu python --force, pldemu pytest "
                         "--pldemu-force)", prog.host().node) from None


def finish(prog: CapturedProgram, built: Built, arrays: dict[str, np.ndarray], result: RunResult,
           what: str = "") -> RunResult:
    """A call's job is over: the host tensors get what the devices computed (when the job ran to its end),
    then its failure is raised as :class:`ProgramRunError` and its truncation findings warned, all in the
    user's words. ``what`` names the call (a prepared worker's dispatch)."""
    result = _user_sites(built, result)
    if result.buffers:
        for wb in built.writebacks:
            if wb.buffer in result.buffers[wb.rank]:  # a prepared worker's resident tensor is not written back
                arrays[wb.param][wb.key] = result.buffers[wb.rank][wb.buffer]
    where = f"{prog.name} on {result.ranks} devices{what}"
    if not result.ok:
        raise ProgramRunError(f"{where}: {result.describe_failure()}", result)
    for t in result.truncations:  # only warnings reach here: a finding fails the job
        warnings.warn(f"{where}: {t.describe()}", TruncationWarning, stacklevel=3)
    return result


def _user_sites(built: Built, result: RunResult) -> RunResult:
    """``result`` with its truncation findings in the user's words (``(me - 1) % n``, not the translated
    ``trem(me - 1, nr)``), once per user site (each rank's block of the program has its own copy of it);
    so too where a failing rank's message names one before its failure."""
    if not (result.truncations or result.failures):
        return result
    named = merge(dataclasses.replace(t, source=built.truncating.get((t.origin, t.expr), ""))
                  for t in result.truncations)
    reword = _user_words(built, "".join(result.failures.values()))
    if reword is None:
        return dataclasses.replace(result, truncations=named)
    return dataclasses.replace(result, truncations=named, output=reword(result.output),
                               failures={r: reword(text) for r, text in result.failures.items()})


def _user_words(built: Built, text: str) -> Callable[[str], str] | None:
    """A rewrite of the truncation sites ``text`` names (``ORIGIN: `EXPR```) into the user's words; None
    when it names none."""
    words = {f"{origin}: `{expr}`": f"{origin}: `{source}`" for (origin, expr), source in built.truncating.items()}
    words = {k: v for k, v in words.items() if k in text}
    if not words:
        return None
    pattern = re.compile("|".join(map(re.escape, words)))
    return lambda t: pattern.sub(lambda m: words[m[0]], t)


def lowered(prog: CapturedProgram, built: Built) -> Program:
    """``built``'s program with its composite collectives lowered (pldemu's LowerCompositeOps), as a job runs
    it; a refusal is one FrontendError at the pypto line of the collective."""
    from pldemu.lowering import lower_composite_ops

    try:
        return lower_composite_ops(built.program)
    except LoweringError as err:
        raise _refused(prog, built, err) from None


def _refused(prog: CapturedProgram, built: Built, err: LoweringError) -> FrontendError:
    """pldemu's lowering refused a collective: the error at the pypto line of the host-level call of
    that op (the first, when several), else at the HOST orchestrator's line."""
    lines = [c.line for c in built.collectives if c.op == err.op.text] + [prog.host().node.lineno]
    return FrontendError(f"pldemu's LowerCompositeOps refused it: {err}", prog.file, lines[0])


def new_output_dir(prog: CapturedProgram) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"pldemu-pypto-{prog.name}-"))


__all__ = [
    "CompiledCall",
    "FrontendError",
    "ProgramRunError",
    "TranslationCache",
    "TruncationWarning",
    "annotation_samples",
    "as_array",
    "bind_dims",
    "finish",
    "lowered",
    "new_output_dir",
    "np_dtype",
    "rank_count_mismatch",
    "run",
    "scalar_value",
    "translate",
]
