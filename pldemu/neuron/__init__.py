"""A small Neuron-style instruction IR and the NeuronEliminateCasts pass on it, executed and checked.

The pass (seeds/000_2e30c24be613b9ff.txt, "Reimplementation contract") removes a bf16 round trip by
re-typing the producer's destination and deleting the widening cast. pld tile ops have no separately
mutable destination dtype, so the pass gets its own IR:

* :mod:`~pldemu.neuron.dtypes`: the dtypes and ``is_int_type``;
* :mod:`~pldemu.neuron.ir`: tensors (SBUF / PSUM / HBM), access patterns, instructions, the editor;
* :mod:`~pldemu.neuron.text`: the text form (parser with ``file:line:col`` errors, printer);
* :mod:`~pldemu.neuron.verifier`: shapes, dtypes, bounds, memories;
* :mod:`~pldemu.neuron.eliminate_casts`: the pass;
* :mod:`~pldemu.neuron.stats`: the statistics registry;
* :mod:`~pldemu.neuron.interpreter` and :mod:`~pldemu.neuron.evaluate`: execution on NumPy + ml_dtypes
  and the comparison against float64 / fp32 references.

The corpus is ``pldemu/examples/neuron/*.nki``; ``pldemu casts FILE --run --stats`` shows it all.
"""
