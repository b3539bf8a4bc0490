"""The one error a pypto program gets from the front end: a message at the user's file:line; and how a
front door (the pytest plugin, ``pldemu python``) names the user's line and a pypto name the layer lacks."""

from __future__ import annotations

import re
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType, ModuleType


class FrontendError(Exception):
    """Unsupported or bad pypto input, reported at ``file:line`` of the user's program (never a
    traceback from inside pldemu: the surface raises it with its context suppressed)."""

    def __init__(self, message: str, file: str = "", line: int = 0) -> None:
        self.message = message
        self.file = file
        self.line = line
        where = f"{file}:{line}: " if file else ""
        super().__init__(where + message)


class AnnotationError(FrontendError, TypeError):
    """A malformed annotation (``pl.Tensor[64, pl.FP32]``), at the line where Python evaluates it; a
    ``TypeError`` too, as Python's own subscript errors are."""


class ConfigError(FrontendError, ValueError):
    """A config value pypto refuses with a ``ValueError`` (``RunConfig(ring_heap=1000)``), at the line
    that built the config; a ``ValueError`` too, so ``pytest.raises(ValueError, match=...)`` holds."""


class ConfigTypeError(FrontendError, TypeError):
    """A config value pypto refuses with a ``TypeError`` (a swimlane level that is no int), at the line
    that built the config."""


def user_frame(depth: int) -> tuple[str, int]:
    """``(file, line)`` of the first frame at or above ``depth`` (counted from the caller) that is not
    generated code (a dataclass's ``__init__`` is ``<string>``) or the ``dataclasses`` module
    (``dataclasses.replace``): the user's line that built a config."""
    frame = sys._getframe(depth + 1)
    while frame.f_back is not None and (frame.f_code.co_filename.startswith("<")
                                        or Path(frame.f_code.co_filename).name == "dataclasses.py"):
        frame = frame.f_back
    return frame.f_code.co_filename, frame.f_lineno


def call_site(err: BaseException, is_user: Callable[[Path], bool], *, innermost: bool = False) -> str:
    """``file:line: code`` and a newline: the user's own line that led to ``err``, the outermost frame of its
    traceback in a file ``is_user`` accepts (a test's line), or the innermost (a script's call; the
    class-body line inside a class statement); ``""`` when no frame is the user's."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if is_user(Path(f.filename))]
    if not frames:
        return ""
    frame = frames[-1 if innermost else 0]
    return f"{frame.filename}:{frame.lineno}: {frame.line}\n"


_SURFACE = "pldemu.pypto.surface"
_CANNOT_IMPORT = re.compile(r"cannot import name '([^']+)'")


SIMPLER_MODULES = frozenset({"simpler", "simpler_setup"})
"""simpler's packages (pypto's simulator and device runtime): a test that imports them drives simpler's
own API, which pldemu does not emulate."""


def missing_pypto_name(err: BaseException) -> str | None:
    """The pypto name (``pypto.runtime.SubWorker``), or simpler module (``simpler.worker``), whose absence
    from the layer raised ``err``, or None when ``err`` is about something else."""
    if isinstance(err, ModuleNotFoundError):
        root = (err.name or "").partition(".")[0]
        return err.name if root == "pypto" or root in SIMPLER_MODULES else None
    if isinstance(err, ImportError):
        found = _CANNOT_IMPORT.match(str(err))
        if found is None or not (err.name or "").startswith(_SURFACE):
            return None
        return f"{_pypto_module(err.name or '')}.{found.group(1)}"
    if not isinstance(err, AttributeError) or err.name is None:
        return None
    return pypto_name_of(err.obj, err.name)


def pypto_name_of(owner: object, attr: str) -> str | None:
    """pypto's full name of ``owner.attr`` (``pypto.language.tile.subc``) for an owner of the surface: one of its
    modules, a DSL namespace or enum named for pypto (``__pypto_name__``), an enum it defines; else None."""
    try:
        named = getattr(owner, "__pypto_name__", None)
    except Exception:  # an owner of the user's whose __getattr__ raises something else: not the surface's
        named = None
    if isinstance(named, str):
        return f"{named}.{attr}"
    if isinstance(owner, ModuleType) and owner.__name__.startswith(_SURFACE):
        return f"{_pypto_module(owner.__name__)}.{attr}"
    if isinstance(owner, type) and owner.__module__.startswith(_SURFACE):  # an enum member
        return f"{_pypto_module(owner.__module__)}.{owner.__qualname__}.{attr}"
    return None


def _pypto_module(name: str) -> str:
    return "pypto" + name[len(_SURFACE):]


_NOT_EMULATED = (
    ("pypto.runtime.device_runner", "out of scope, simpler's device runner (ChipCallable, execute_on_device; only "
                                    "compile_and_assemble is provided, for pypto's test harness): "
                                    "pypto's boundary to simpler's runtime, which pldemu does not emulate"),
    *((root, "out of scope, simpler's own runtime API (Worker, TaskArgs, make_tensor_arg), not pypto's: pldemu "
             "runs pypto's DSL and does not emulate simpler") for root in sorted(SIMPLER_MODULES)),
)
"""Name prefixes that are out of scope for a reason of their own (simpler's API), and the reason."""


_PL = "pypto.language"
_PIPES = ("out of scope, pypto's cross-core pipe between a cluster's cube (AIC) and vector (AIV) cores (TPUSH / "
          "TPOP / TFREE and their buffers): pldemu runs a region's split written as pl.split_aiv, pl.aiv_shard and "
          "pl.aic_gather, not hand-written pipes")
_PRINTED_IR = ("out of scope, a type of pypto's printed IR (memory references, pointers, tile and tensor views, loop "
               "kinds, pipes): pldemu runs programs written in the DSL (@pl.program, pl.jit), not printed IR")
_PARSER = ("out of scope, pypto's parser entry point (IR text or a function to an ir.Program): pldemu runs a "
           "program from its Python source through @pl.program or pl.jit")
_DTYPE = ("out of scope, an element type pldemu's IR has no tensors of (it holds BOOL, INT8 .. INT64, UINT8 .. "
          "UINT32, FP16, BF16, FP32 and INDEX; its FP8 types live only inside MX quantisation)")
_MX = ("out of scope, pypto's MX block-scale matmul (FP8E4M3FN data with FP8E8M0 scales, Ascend950) and its GM "
       "scale layouts: pldemu's IR has MX quantisation (tile.tquant_mx), not the MX matmul")
_SUBC = ("out of scope, pypto documents pl.subc / pl.subsc as lhs - rhs - rhs2 (its docstrings and torch codegen) "
         "while pto-isa's TSUBC / TSUBSC compute src0 - src1 + src2 (its ISA pages, CPU model and kernels): pldemu "
         "does not guess which one the device runs; write two pl.sub")
_A5_GATHER = ("out of scope, pypto's A5 gathers and scatters (MGATHER / MSCATTER by element index, TGATHERB by "
              "32-byte block offsets; pto-isa has no A2/A3 kernel of them): pldemu runs pl.gather, pl.scatter and "
              "pl.gather_row")

_PIPE_NAMES = ("tpush_to_aiv", "tpush_to_aic", "tpop_from_aic", "tpop_from_aiv", "tfree_to_aic", "tfree_to_aiv",
               "aic_initialize_pipe", "aiv_initialize_pipe", "reserve_buffer", "import_peer_buffer")
_ALLOC = ("out of scope, a stub of pypto's printed IR (tile.alloc / tensor.alloc: the memory planner's allocation "
          "token, never written in a DSL program): pldemu runs programs written in the DSL, not printed IR")
_CROSS_CORE_EVENTS = ("out of scope, a hand-written cross-core event between a cluster's cube (AIC) and vector (AIV) "
                      "cores (FFTS flags by event id): pldemu runs a mixed kernel's body in its source order and "
                      "does not model the event flags; write the split as pl.split_aiv, pl.aiv_shard and "
                      "pl.aic_gather")
_PIPE_FLAGS = ("out of scope, a hand-written flag between two pipes of one core (set_flag / wait_flag, named by "
               "pl.PipeType, which pypto's sync insertion places itself): pldemu does not model a core's pipes, "
               "each tile op completes before the next starts")
_CORE_COUNT = ("out of scope, the core count of the device the run lands on (the runtime's "
               "rt_available_cluster_count() / rt_available_aiv_count()): pldemu has no such device and takes a "
               "pl.spmd core_num known when the program is translated; pass the count")
_GATHER_COMPARE = ("out of scope, pto.tgather's compare form (each row's indices where src compares true with "
                   "kvalue, and their counts): what fills a row past its count, and a row with more matches than "
                   "out_cols, are pto-isa's, which pldemu has no reference for; pl.cmps, pl.sel and pl.row_sum "
                   "compute the mask and the counts")

NOT_RUN: Mapping[str, str] = MappingProxyType({
    **{f"{_PL}.{n}": _PIPES for n in ("AUTO", *_PIPE_NAMES, "PipeType", "system.AUTO", "tile.tpush_to_aiv",
                                       "tile.tpush_to_aic", "tile.tpop_from_aic", "tile.tpop_from_aiv",
                                       *(f"system.{p}" for p in _PIPE_NAMES))},
    **{f"{_PL}.{n}": _PRINTED_IR for n in ("ForKind", "CompactMode", "MemRef", "MemRefType", "Ptr", "PtrType",
                                            "TensorView", "TileView", "tile.MemRefType")},
    **{f"{_PL}.{n}": _ALLOC for n in ("tile.alloc", "tensor.alloc")},
    **{f"{_PL}.system.{n}": _CROSS_CORE_EVENTS for n in ("sync_set", "sync_wait", "set_ffts")},
    **{f"{_PL}.system.{n}": _PIPE_FLAGS for n in ("sync_src", "sync_dst")},
    **{f"{_PL}.system.{n}": _CORE_COUNT for n in ("available_cluster_count", "available_aiv_count")},
    f"{_PL}.tile.gather_compare": _GATHER_COMPARE,
    **{f"{_PL}.{n}": _PARSER for n in ("parse", "parse_program", "loads", "loads_program", "parser")},
    **{f"{_PL}.{n}": _DTYPE for n in ("FP4", "FP8E4M3FN", "FP8E5M2", "FP8E8M0", "HF4", "HF8", "INT4", "UINT4",
                                       "UINT64")},
    **{f"{_PL}.{n}": _MX for n in ("MX_A_ZZ", "MX_B_NN", "TensorLayout.MX_A_ZZ", "TensorLayout.MX_B_NN",
                                    "matmul_mx", "matmul_mx_acc", "matmul_mx_bias", "tile.matmul_mx",
                                    "tile.matmul_mx_acc", "tile.matmul_mx_bias")},
    **{f"{_PL}.{n}": _SUBC for n in ("subc", "subsc", "tile.subc", "tile.subsc")},
    **{f"{_PL}.{n}": _A5_GATHER for n in ("mgather", "mscatter", "gatherb", "tile.mgather", "tile.mscatter",
                                          "tile.gatherb")},
    f"{_PL}.adir": ("out of scope, pypto's per-call argument directions of printed IR (attrs={'arg_directions': "
                    "[...]}): pldemu takes a kernel's directions from its pl.Out / pl.InOut parameters"),
    f"{_PL}.TileLayout": ("out of scope, pypto's tile layouts (pl.move's blayout= / slayout=, pl.TileView): pldemu's "
                          "tiles are row-major"),
    **{f"{_PL}.{n}": ("out of scope, pypto's @pl.inline helper of a @pl.program class (expanded at its call sites) "
                      "is not run by pldemu yet: a pl.jit program's pl.jit.inline helpers are")
       for n in ("inline", "InlineFunction")},
    **{f"{_PL}.{n}": ("out of scope, pypto's counter-based random tile (pto.trandom's Philox / ChaCha rounds): pldemu "
                      "does not reproduce the device's bit stream; pass random data in as a tensor")
       for n in ("random", "tensor.random", "tile.random")},
    **{f"{_PL}.{n}": ("out of scope, pypto's paged gather into L1 (a scalar per-row DMA through a block table): "
                      "pldemu runs the same gather written with pl.gather_row into pl.create_l1")
       for n in ("paged_gather", "tensor.paged_gather")},
    **{f"{_PL}.{n}": ("out of scope, a zero-copy reinterpretation of a tensor's or tile's bytes as another dtype: "
                      "not run by pldemu yet")
       for n in ("reinterpret_view", "tensor.reinterpret_view", "tile.reinterpret_view")},
    **{f"{_PL}.{n}": ("out of scope, pypto's rank-3 clone into a target with one broadcast axis (tensor.expand_clone): "
                      "not run by pldemu yet; pl.row_expand / pl.col_expand and pl.assemble write the same")
       for n in ("expand_clone", "tensor.expand_clone")},
    **{f"{_PL}.{n}": ("out of scope, pypto's row scatter of a KV cache (scatter_update): not run by pldemu yet; "
                      "pl.assemble of each row writes the same")
       for n in ("scatter_update", "tensor.scatter_update", "tile.scatter_update")},
    **{f"{_PL}.distributed.tile.{n}": (f"out of scope, the tile-level form of pld.tensor.{n} with explicit staging "
                                        "tiles that pypto's ConvertTensorToTileOps emits, defined for printed IR to "
                                        f"parse back (pypto: user code calls pld.tensor.{n}): pldemu runs "
                                        f"pld.tensor.{n}, staged the same way")
       for n in ("put", "get")},
})
"""pypto names pldemu does not run, by pypto's full name, and the reason its refusal gives (after the name)."""


def not_provided(name: str, shown: str | None = None) -> str:
    """What a pypto name the layer lacks is told as (after the user's ``file:line: ``); ``shown``: the name as
    the user spelled it (``pl.tile.subc``), when not pypto's full name."""
    reason = NOT_RUN.get(name) or next(
        (why for prefix, why in _NOT_EMULATED if name == prefix or name.startswith(prefix + ".")), "out of scope")
    return f"{shown or name} is not provided by pldemu's pypto layer ({reason}: see docs/pypto-frontend.md)"


__all__ = ["NOT_RUN", "SIMPLER_MODULES", "AnnotationError", "ConfigError", "ConfigTypeError", "FrontendError", "call_site",
           "missing_pypto_name", "not_provided", "pypto_name_of", "user_frame"]
