"""A small numpy-backed stand-in for ``torch``: what pypto's distributed tests and pypto-lib's golden
harness (``golden/``: ``TensorSpec``, ``run_jit``, ``validate_golden``) use, nothing more.

While the pypto layer is active and no real torch is installed, ``import torch`` gives this package
(:mod:`pldemu.pypto.finder`); with real torch installed the finder stays out of the way. It covers
the dtypes (``bfloat16`` through ml_dtypes), the factories (``zeros``, ``full``, ``arange``,
``tensor``, ...), ``stack`` / ``cat``, ``allclose`` / ``equal`` / ``all``, ``torch.testing.assert_close``
and a :class:`Tensor` with torch's views, reductions (``sum/prod/max/min(dim=)``), indexing and
broadcasting arithmetic under torch's type-promotion rules. ``set_num_threads`` is checked and
ignored (numpy has no intra-op pool to size).

A Tensor holds one numpy array; ``tensor.numpy()`` is that array (not a copy), which is how a compiled
pypto call writes its Out / InOut results back in place (real torch CPU tensors share memory the same
way). ``manual_seed`` / ``rand`` / ``randn`` / ``randint`` draw from numpy's generator (the same inputs
for the same seed, not torch's numbers). A torch name the stand-in lacks (``torch.einsum``, ...) is an
AttributeError that says so and names the fix: install torch.
"""

from __future__ import annotations

from typing import NoReturn

from pldemu.pypto.torchlite import testing
from pldemu.pypto.torchlite.dtypes import (
    bfloat16,
    dtype,
    float8_e4m3fn,
    float8_e8m0fnu,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
)
from pldemu.pypto.torchlite.dtypes import bool_ as bool
from pldemu.pypto.torchlite.functions import (
    abs,
    add,
    all,
    allclose,
    any,
    arange,
    as_tensor,
    cat,
    clamp,
    clip,
    concat,
    cumsum,
    einsum,
    empty,
    empty_like,
    equal,
    exp2,
    flip,
    from_numpy,
    full,
    full_like,
    is_floating_point,
    is_tensor,
    isclose,
    matmul,
    max,
    maximum,
    min,
    minimum,
    numel,
    ones,
    ones_like,
    outer,
    prod,
    promote_types,
    remainder,
    roll,
    set_num_threads,
    stack,
    sum,
    tensor,
    where,
    zeros,
    zeros_like,
)
from pldemu.pypto.torchlite.mathfns import (
    amax,
    amin,
    argmax,
    argsort,
    bucketize,
    ceil,
    cos,
    exp,
    finfo,
    floor,
    gather,
    iinfo,
    index_select,
    inf,
    isfinite,
    isinf,
    isnan,
    log,
    log2,
    mean,
    nan,
    neg,
    nonzero,
    round,
    rsqrt,
    sigmoid,
    sign,
    sin,
    softmax,
    sort,
    sqrt,
    square,
    topk,
    unique,
)
from pldemu.pypto.torchlite.random import Generator, manual_seed, rand, randint, randn, randperm
from pldemu.pypto.torchlite.tensor import Size, Tensor

float = float32
double = float64
half = float16
int = int32
long = int64

__version__ = "0.0+pldemu.torchlite"


def __getattr__(name: str) -> NoReturn:
    raise AttributeError(f"torch.{name} is not in pldemu's torch stand-in (pldemu.pypto.torchlite, the torch "
                         "functions pypto's distributed tests and pypto-lib's golden harness use); install torch to use it")


__all__ = [
    "Generator",
    "Size",
    "Tensor",
    "abs",
    "add",
    "all",
    "allclose",
    "amax",
    "amin",
    "any",
    "arange",
    "argmax",
    "argsort",
    "as_tensor",
    "bfloat16",
    "bool",
    "bucketize",
    "cat",
    "ceil",
    "clamp",
    "clip",
    "concat",
    "cos",
    "cumsum",
    "double",
    "dtype",
    "einsum",
    "empty",
    "empty_like",
    "equal",
    "exp",
    "exp2",
    "finfo",
    "flip",
    "float",
    "float8_e4m3fn",
    "float8_e8m0fnu",
    "float16",
    "float32",
    "float64",
    "floor",
    "from_numpy",
    "full",
    "full_like",
    "gather",
    "half",
    "iinfo",
    "index_select",
    "inf",
    "int",
    "int8",
    "int16",
    "int32",
    "int64",
    "is_floating_point",
    "is_tensor",
    "isclose",
    "isfinite",
    "isinf",
    "isnan",
    "log",
    "log2",
    "long",
    "manual_seed",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "nan",
    "neg",
    "nonzero",
    "numel",
    "ones",
    "ones_like",
    "outer",
    "prod",
    "promote_types",
    "rand",
    "randint",
    "randn",
    "randperm",
    "remainder",
    "roll",
    "round",
    "rsqrt",
    "set_num_threads",
    "sigmoid",
    "sign",
    "sin",
    "softmax",
    "sort",
    "sqrt",
    "square",
    "stack",
    "sum",
    "tensor",
    "testing",
    "topk",
    "uint8",
    "unique",
    "where",
    "zeros",
    "zeros_like",
]
