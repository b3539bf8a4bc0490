"""What ``import pypto`` is while the layer is active: the root of pypto's public DSL surface.

``pypto.language`` (``pl``), ``pypto.language.distributed`` (``pld``), ``pypto.ir`` and
``pypto.runtime`` are the submodules of this package; the finder (``pldemu.pypto.finder``) serves
them under pypto's names.
"""
