"""pypto's ``CompiledProgram`` metadata on pldemu's compiled program: ``param_names`` (the orchestrator's
parameters, in order) and ``output_indices`` (its pure Out parameters), as pypto's properties name them."""

from __future__ import annotations

from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

W = 8


@pl.program
class Add:
    @pl.function(type=pl.FunctionType.InCore)
    def add(self, a: pl.Tensor[[1, W], pl.FP32], b: pl.Tensor[[1, W], pl.FP32],
            c: pl.Out[pl.Tensor[[1, W], pl.FP32]]) -> pl.Tensor[[1, W], pl.FP32]:
        return pl.store(pl.add(pl.load(a, [0, 0], [1, W]), pl.load(b, [0, 0], [1, W])), [0, 0], c)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, a: pl.Tensor[[1, W], pl.FP32], b: pl.Tensor[[1, W], pl.FP32],
                  c: pl.Out[pl.Tensor[[1, W], pl.FP32]]) -> None:
        self.add(a, b, c, device=0)


def test_param_names_and_output_indices_are_the_orchestrators() -> None:
    compiled = ir.compile(Add, distributed_config=DistributedConfig(device_ids=[0]))
    assert compiled.param_names == ["a", "b", "c"]
    assert compiled.output_indices == [2]
