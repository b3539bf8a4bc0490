"""LowerCompositeOps: rewrite ``pld.tensor.*`` collectives into notify/wait + data-movement recipes,
and the tile composites (``tile.sin`` / ``tile.cos`` / ``tile.select``) into primitive tile ops.

The pass object ``LowerCompositeOps`` (options as fields: the recipe variant and the tile.select
backend; ``apply(program) -> Program``) and its statement rewriter live in ``pass_``; one module per
collective or composite family writes the recipes (``math`` for sin/cos, ``select`` for select, with
the scratch-planning targets in ``backend``); shared protocol pieces (context, credit barrier,
epilogue, geometry, NR checks) are in ``common``; the ``op -> rule`` table and the argument roles
derived from the signature table in ``rules``; the recipe variants (deliberate deviations, for the
mutant catalogue) in ``variant``. IR traversal and constant / NR evaluation come from the IR package
(``pldemu.ir.walk``, ``pldemu.ir.nodes.evaluate``). ``insert_comm_fence`` holds the second pass,
InsertCommFence (the memory-ordering markers ``--visibility fenced`` needs), run after this one;
``toolchain_drains`` the drains PTOAS emits by itself (``insert_fences``: both, as fenced mode runs them).
"""

from pldemu.lowering.common import LoweringError
from pldemu.lowering.insert_comm_fence import DropMarker, InsertCommFence, Marker
from pldemu.lowering.pass_ import (
    CallReport,
    LowerCompositeOps,
    LoweringReport,
    composite_calls,
    lower_composite_ops,
    lower_composite_ops_with_report,
)
from pldemu.lowering.rules import RULES
from pldemu.lowering.toolchain_drains import InsertToolchainDrains, insert_fences
from pldemu.lowering.variant import CORRECT, RecipeVariant

__all__ = [
    "CORRECT",
    "RULES",
    "CallReport",
    "DropMarker",
    "InsertCommFence",
    "InsertToolchainDrains",
    "LowerCompositeOps",
    "LoweringError",
    "LoweringReport",
    "Marker",
    "RecipeVariant",
    "composite_calls",
    "insert_fences",
    "lower_composite_ops",
    "lower_composite_ops_with_report",
]
