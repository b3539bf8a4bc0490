"""``pypto.ir.distributed_compiled_program``: the config and the compiled program a call runs.

Calling a :class:`DistributedCompiledProgram` goes through
``pypto.runtime.distributed_runner.execute_distributed`` (looked up at call time), which is the one
execution edge pypto's ``--codegen-only`` conftest patches.
"""

from __future__ import annotations

import dataclasses
import enum
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pldemu.pypto.capture import CapturedProgram
from pldemu.pypto.types import Direction, DynExpr, DynVar, ScalarAnn, TensorAnn

RUNTIMES = ("tensormap_and_ringbuffer",)
"""simpler's runtime flavours pypto accepts for an L3 program (``DistributedConfig.runtime``)."""


@dataclasses.dataclass(frozen=True)
class DistributedConfig:
    """The devices of one program (``device_ids``: one rank each), with pypto's other fields: checked as
    pypto checks them, and without effect on pldemu (``runtime`` is simpler's flavour;
    ``aicpu_thread_num`` its AICPU threads; a program has one sequential thread per rank here).
    ``num_sub_workers`` is pypto's request for SubWorkers per chip process: 0 means as many as the
    program declares, more leaves the extras idle; any count is accepted."""

    device_ids: Sequence[int] = (0,)
    num_sub_workers: int = 0
    runtime: str = "tensormap_and_ringbuffer"
    aicpu_thread_num: int | None = 0

    def __post_init__(self) -> None:
        ids = list(self.device_ids)
        if not ids:
            raise ValueError("DistributedConfig.device_ids must not be empty")
        if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
            raise ValueError(f"DistributedConfig.device_ids must be non-negative device indices, got {ids}")
        if len(set(ids)) != len(ids):
            raise ValueError(f"DistributedConfig.device_ids must be distinct, got {ids}")
        if self.num_sub_workers < 0:
            raise ValueError(f"DistributedConfig.num_sub_workers must be non-negative, got {self.num_sub_workers}")
        if self.aicpu_thread_num not in (None, 0) and self.aicpu_thread_num < 2:
            raise ValueError(f"DistributedConfig.aicpu_thread_num must be 0 (the platform default) or at least 2, "
                             f"got {self.aicpu_thread_num}")


ParamDirection = enum.Enum("ParamDirection", {d.value: d.value for d in Direction})  # type: ignore[misc]
"""``pypto.ir.ParamDirection`` of a host parameter: ``In``, ``Out``, ``InOut`` (pypto's member names for
the annotations' :class:`~pldemu.pypto.types.Direction`)."""


@dataclasses.dataclass(frozen=True)
class ParamInfo:
    """One host parameter as ``_get_metadata`` describes it (pypto's ``_ParamInfo``)."""

    name: str
    direction: ParamDirection
    shape: list[int] | None
    """-1 for a dynamic dim; None for a scalar."""
    dtype: Any


class MemoryEstimateWarning(UserWarning):
    """Compile translated a program whose call would need more memory than this machine has."""


class DistributedCompiledProgram:
    """A compiled program: call it with the host tensors; Out / InOut ones are written in place."""

    def __init__(self, program: CapturedProgram, config: DistributedConfig, platform: str | None,
                 output_dir: Path | None = None) -> None:
        from pldemu.pypto.artifacts import write_compile_artifacts
        from pldemu.pypto.execute import TranslationCache, new_output_dir

        self.program = program
        self.config = config
        self.platform = platform
        self.output_dir: Path = output_dir if output_dir is not None else new_output_dir(program)
        self.last: Any = None
        self.translations = TranslationCache()
        """Its translations by kind of call (:meth:`translate_ahead`'s and each call's): a call of a kind
        translated before does not translate again."""
        self.untranslated: str | None = "not compiled with arguments"
        """Why the last :meth:`translate_ahead` did not translate (what only a call can tell), or None."""
        write_compile_artifacts(program, self.output_dir, platform or "a2a3sim")

    def translate_ahead(self, samples: list[Any] | str) -> None:
        """Translate now for a call with these host arguments, so that what pldemu refuses (an unsupported
        name or construct) is one error at its line at compile time, and a later call of their kind reuses
        the translation; ``samples`` a string: why that cannot be done before a call (kept as
        :attr:`untranslated`)."""
        if isinstance(samples, str):
            self.untranslated = samples
            return
        built, _ = self.translations.translate(self.program, self.nranks, samples)
        self.untranslated = None
        self._warn_if_too_big(built)

    def _warn_if_too_big(self, built: Any) -> None:
        """A :class:`MemoryEstimateWarning` when a call of the samples would be refused for its memory (what
        ``--compile-only`` can tell of a model layer that does not fit this machine)."""
        from pldemu.job.resources import ResourceError, check_fits
        from pldemu.pypto.execute import memory_estimate
        from pldemu.pypto.session import current_options

        opts = current_options()
        try:
            check_fits(memory_estimate(built, self.nranks, opts), opts.force)
        except ResourceError as err:
            warnings.warn(f"{self.program.name} on {self.nranks} devices: a call of these arguments will be "
                          f"refused before its job starts: {err}", MemoryEstimateWarning, stacklevel=4)

    @property
    def nranks(self) -> int:
        return len(self.config.device_ids)

    def __call__(self, *args: Any, config: Any = None) -> Any:
        """Run on the compile-time devices (a call's ``config`` cannot move them, as in pypto; its DFX
        switches are answered per call, :mod:`pldemu.pypto.dfx`; its other fields have no effect here)."""
        __tracebackhide__ = True
        from pldemu.pypto.dfx import check_config
        from pldemu.pypto.surface.runtime import distributed_runner

        check_config(config, type(self).__name__)
        full, outs = self._with_outputs(args)
        distributed_runner.execute_distributed(self, *full, config=config)
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _with_outputs(self, args: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[Any]]:
        """pypto's return-style call: with the pure Out parameters left out, they are allocated (zeros) and
        returned; with every argument given, nothing is."""
        infos, out_indices, _ = self._get_metadata()
        if len(args) != len(infos) - len(out_indices) or not out_indices:
            return args, []
        import torch  # type: ignore[import-not-found]  # real torch, or the stand-in while active

        from pldemu.pypto.types import torch_dtype

        given = iter(args)
        full: list[Any] = []
        outs: list[Any] = []
        for i, info in enumerate(infos):
            if i not in out_indices:
                full.append(next(given))
                continue
            if info.shape is None or any(d < 0 for d in info.shape):
                raise ValueError(f"Cannot allocate output tensor {info.name!r}: shape {info.shape} contains "
                                 "dynamic dimensions.")
            outs.append(torch.zeros(info.shape, dtype=torch_dtype(info.dtype, torch)))
            full.append(outs[-1])
        return tuple(full), outs

    def _get_metadata(self) -> tuple[list[ParamInfo], list[int], list[Any]]:
        """The HOST orchestrator's parameters (name, direction, shape, dtype), the indices of its pure
        Out parameters, and its return types (none: pldemu's calls write in place)."""
        infos: list[ParamInfo] = []
        for p in self.program.host().params:
            ann = self.program.host().annotations.get(p)
            if isinstance(ann, TensorAnn) and ann.dims is not None:
                shape = [-1 if isinstance(d, (DynVar, DynExpr)) else int(d) for d in ann.dims]
                infos.append(ParamInfo(p, ParamDirection(ann.direction.value), shape, ann.dtype))
            else:
                scalar = ann.dtype if isinstance(ann, ScalarAnn) else None
                infos.append(ParamInfo(p, ParamDirection(Direction.IN.value), None, scalar))
        outs = [i for i, info in enumerate(infos) if info.direction.value == Direction.OUT.value]
        return infos, outs, []

    @property
    def param_names(self) -> list[str]:
        """The HOST orchestrator's parameter names, in order (pypto's ``CompiledProgram.param_names``)."""
        return [p.name for p in self._get_metadata()[0]]

    @property
    def output_indices(self) -> list[int]:
        """The indices of its pure Out parameters, those a call may leave out (pypto's, same name)."""
        return list(self._get_metadata()[1])

    def prepare(self, config: Any = None, *, extra_compiled: Sequence[DistributedCompiledProgram] = (),
                persistent: bool = False, reset_persistent_windows: bool | None = None,
                callbacks: dict[str, Any] | None = None, sub_worker_overrides: dict[str, Any] | None = None,
                startup_timeout_s: float | None = None) -> Any:
        """A prepared worker (:class:`pldemu.pypto.prepared.DistributedWorker`): one resident job that
        dispatches this program (and ``extra_compiled``) many times, keeping windows and resident tensors."""
        from pldemu.pypto.prepared import DistributedWorker

        return DistributedWorker([self, *extra_compiled], config, persistent=persistent,
                                 reset_persistent_windows=reset_persistent_windows, callbacks=callbacks,
                                 sub_worker_overrides=sub_worker_overrides, startup_timeout_s=startup_timeout_s)

    def __str__(self) -> str:
        return str(self.output_dir)


__all__ = ["DistributedCompiledProgram", "DistributedConfig", "MemoryEstimateWarning", "ParamDirection", "ParamInfo"]
