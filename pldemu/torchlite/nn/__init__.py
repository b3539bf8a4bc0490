"""``torch.nn`` of the stand-in: only ``torch.nn.functional`` (what pypto-lib's golden reports use)."""

from __future__ import annotations

from pldemu.torchlite.nn import functional

__all__ = ["functional"]
