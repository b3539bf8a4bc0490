"""LowerCompositeOps: rewrite ``pld.tensor.*`` collectives into notify/wait + data-movement recipes.

One module per collective, shared protocol pieces in ``common``, the dispatch table in ``rules``
and the statement rewriter in ``pass_``.
"""

from pldemu.lowering.common import LoweringError
from pldemu.lowering.pass_ import (
    CallReport,
    LoweringReport,
    lower_composite_ops,
    lower_composite_ops_with_report,
)
from pldemu.lowering.rules import RULES

__all__ = [
    "RULES",
    "CallReport",
    "LoweringError",
    "LoweringReport",
    "lower_composite_ops",
    "lower_composite_ops_with_report",
]
