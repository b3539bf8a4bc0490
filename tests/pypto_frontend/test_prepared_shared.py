"""A prepared worker's shared-memory rule applies to tensor parameters only: a scalar parameter given as a
0-d tensor (pypto-lib's ScalarSpec values, real torch's tensors are unshared) is forwarded as a value."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.pypto.prepared import check_shared
from pldemu.pypto.types import INT32, Direction, ScalarAnn, TensorAnn


class _Unshared(np.ndarray):
    """What real torch gives before ``share_memory_()``."""

    def is_shared(self) -> bool:
        return False


def test_an_unshared_tensor_is_refused_but_an_unshared_scalar_is_not() -> None:
    value = np.asarray(7, np.int32).view(_Unshared)
    check_shared("local_t", ScalarAnn(INT32), value)
    with pytest.raises(TypeError, match="'x': a host torch\\.Tensor passed to a DistributedWorker must be shared"):
        check_shared("x", TensorAnn((4,), INT32, direction=Direction.IN), np.zeros(4, np.int32).view(_Unshared))
