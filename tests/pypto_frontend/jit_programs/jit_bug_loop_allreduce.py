"""pypto's debugging table, "Allreduce rejected inside loop": a HOST allreduce that omits its signal,
inside a host loop (pypto synthesises one signal per call site, so it cannot give each iteration a
fresh one). pldemu refuses it at the allreduce's line, as pypto does."""

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
COLS = 64


@pl.jit.host
def rounds(x: pl.InOut[pl.Tensor[[NR, 1, COLS], pl.FP32]]):
    data_buf = pld.alloc_window_buffer([1, COLS], dtype=pl.FP32)
    data = pld.window(data_buf, [1, COLS], dtype=pl.FP32)
    for _ in pl.range(2):
        data = pld.tensor.allreduce(data)  # BUG: no signal, inside a loop


def test_signal_less_allreduce_in_a_loop():
    rounds(torch.ones((2, 1, COLS)), config=RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1])))
