"""LowerCompositeOps: rewrite ``pld.tensor.*`` collectives into notify/wait + data-movement recipes,
and the tile composites (``tile.sin`` / ``tile.cos`` / ``tile.select``) into primitive tile ops.

One module per collective or composite family (``math`` for sin/cos, ``select`` for select, with the
scratch-planning targets in ``backend``), shared protocol pieces in ``common``, the dispatch table in
``rules``, the statement rewriter in ``pass_``, and the recipe variants (deliberate deviations, for the
mutant catalogue) in ``variant``.
"""

from pldemu.lowering.common import LoweringError
from pldemu.lowering.pass_ import (
    CallReport,
    LoweringReport,
    composite_calls,
    lower_composite_ops,
    lower_composite_ops_with_report,
)
from pldemu.lowering.rules import RULES
from pldemu.lowering.variant import CORRECT, RecipeVariant

__all__ = [
    "CORRECT",
    "RULES",
    "CallReport",
    "LoweringError",
    "LoweringReport",
    "RecipeVariant",
    "composite_calls",
    "lower_composite_ops",
    "lower_composite_ops_with_report",
]
