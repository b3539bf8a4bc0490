"""The non-collective check kinds of ``pldemu check`` (tile: sin, cos, select; MX: tquant_mx)."""
