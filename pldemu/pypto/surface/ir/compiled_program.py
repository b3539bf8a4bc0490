"""``pypto.ir.compiled_program``: what ``ir.compile`` gives for an L2-only program (no HOST function).

pypto compiles such a program for one chip: one Orchestration is called as ``compiled(...)``; with
several, each is a sub-build under ``output_dir/next_levels/<name>/``, chosen by ``compiled[name]`` or
``compiled.<name>``, and a plain call refuses to guess. Here an Orchestration runs as an L2 entry of
``pl.jit`` does: through a HOST that dispatches it once to device 0 of a one-rank job
(:meth:`~pldemu.pypto.capture.CapturedProgram.with_single_device_host`), the one compiled-call path
(:func:`pldemu.pypto.execute.run`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pldemu.pypto.capture import CapturedFunction, CapturedProgram, Kind
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.types import Direction, TensorAnn

NEXT_LEVELS = "next_levels"


def orchestrations(program: CapturedProgram) -> list[str]:
    """The program's Orchestration functions, sorted by name."""
    return sorted(name for name, fn in program.functions.items() if fn.kind is Kind.ORCHESTRATION)


class OrchestrationCallable:
    """One Orchestration of an L2 program, callable as pypto calls it (``compiled[name]``, or the program
    itself when it has one): ``name``, ``output_dir``, ``platform``, ``param_names``, ``output_indices``."""

    __test__ = False

    def __init__(self, program: CapturedProgram, name: str, output_dir: Path, platform: str) -> None:
        from pldemu.pypto.execute import TranslationCache, annotation_samples

        self._entry = program.with_single_device_host(name)
        self._name = name
        self._output_dir = output_dir
        self._platform = platform
        self.last: Any = None
        """What the last call produced (:class:`~pldemu.pypto.execute.CompiledCall`)."""
        self.translations = TranslationCache()
        """Its translations by kind of call: at compile when the annotations tell everything a call
        would (else :attr:`untranslated` says what is missing), and each call's."""
        samples = annotation_samples(self._entry, 1)
        self.untranslated: str | None = samples if isinstance(samples, str) else None
        if not isinstance(samples, str):
            self.translations.translate(self._entry, 1, samples)

    @property
    def name(self) -> str:
        return self._name

    @property
    def output_dir(self) -> Path:
        return self._output_dir

    @property
    def platform(self) -> str:
        return self._platform

    @property
    def function(self) -> CapturedFunction:
        return self._entry.functions[self._name]

    @property
    def param_names(self) -> list[str]:
        """The Orchestration's parameter names, in order."""
        return list(self.function.params)

    @property
    def output_indices(self) -> list[int]:
        """Indices of its pure ``pl.Out`` parameters."""
        anns = self.function.annotations
        return [i for i, p in enumerate(self.function.params)
                if isinstance(ann := anns.get(p), TensorAnn) and ann.direction is Direction.OUT]

    def __call__(self, *args: Any, config: Any = None) -> None:
        """Run the Orchestration on one device with ``args`` (Out / InOut tensors written in place);
        ``config``'s DFX switches are answered per call (:mod:`pldemu.pypto.dfx`)."""
        __tracebackhide__ = True
        from pldemu.pypto.dfx import call_options, check_config
        from pldemu.pypto.execute import run

        check_config(config, f"orchestration {self._name!r}")
        try:
            self.last = run(self._entry, 1, args, self._output_dir, call_options(config, self._output_dir),
                            self.translations)
        except FrontendError as err:
            raise err.with_traceback(None) from None

    def __repr__(self) -> str:
        return f"_SubChipCallable({self._name!r} @ {self._output_dir})"


class CompiledProgram:
    """pypto's ``CompiledProgram``: an L2-only program compiled for one chip. With one Orchestration it is
    called directly; with several, :attr:`orchestration_names` lists them and ``compiled[name]`` /
    ``compiled.<name>`` gives each one's callable (its ``output_dir`` is ``output_dir/next_levels/<name>``)."""

    __test__ = False

    def __init__(self, program: CapturedProgram, output_dir: Path, platform: str | None) -> None:
        from pldemu.pypto.artifacts import write_compile_artifacts
        from pldemu.pypto.finder import remember_compiled

        self.program = program
        self._output_dir = output_dir
        self._platform = platform or "a2a3sim"
        names = orchestrations(program)
        if not names:
            raise FrontendError(f"program {program.name} has neither a HOST orchestrator nor an Orchestration "
                                "function: pldemu runs a program from one of them", program.file, program.line)
        self._single = OrchestrationCallable(program, names[0], output_dir, self._platform) if len(names) == 1 else None
        self._sub_chips: Mapping[str, OrchestrationCallable] = {} if self._single else {
            n: OrchestrationCallable(program, n, output_dir / NEXT_LEVELS / n, self._platform) for n in names}
        write_compile_artifacts(program, output_dir, self._platform)
        remember_compiled(output_dir, self)

    @property
    def output_dir(self) -> Path:
        return self._output_dir

    @property
    def platform(self) -> str:
        return self._platform

    @property
    def orchestration_names(self) -> list[str]:
        """Names of the Orchestrations ``compiled[name]`` selects (sorted; empty with only one)."""
        return sorted(self._sub_chips)

    @property
    def param_names(self) -> list[str]:
        """The single Orchestration's parameter names."""
        return self._only().param_names

    @property
    def output_indices(self) -> list[int]:
        """The single Orchestration's pure ``pl.Out`` parameter indices."""
        return self._only().output_indices

    @property
    def last(self) -> Any:
        """What the last direct call produced."""
        return self._only().last

    def __getitem__(self, name: str) -> OrchestrationCallable:
        if name not in self._sub_chips:
            raise KeyError(f"No orchestration {name!r} under {self._output_dir / NEXT_LEVELS}. "
                           f"Available: {sorted(self._sub_chips)}")
        return self._sub_chips[name]

    def __getattr__(self, name: str) -> OrchestrationCallable:
        sub_chips = self.__dict__.get("_sub_chips", {})  # read directly: no recursion before __init__ ends
        if name in sub_chips:
            return self[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _only(self) -> OrchestrationCallable:
        if self._single is None:
            raise TypeError(f"Program has {len(self._sub_chips)} L2 orchestrations {sorted(self._sub_chips)}; "
                            "select one explicitly via compiled['<name>'](...) or compiled.<name>(...).")
        return self._single

    def __call__(self, *args: Any, config: Any = None) -> None:
        """Run the single Orchestration (a program with several refuses: select one by name)."""
        __tracebackhide__ = True
        return self._only()(*args, config=config)

    def __str__(self) -> str:
        return str(self._output_dir)

    def __repr__(self) -> str:
        return f"CompiledProgram({self.program.name!r} @ {self._output_dir})"


__all__ = ["NEXT_LEVELS", "CompiledProgram", "OrchestrationCallable", "orchestrations"]
