"""The decode layer: tensor-parallel decoding of a trained or random ``GPT``
(:mod:`gtalib.decode.tp`: shard plans, sharded attention, spawned gloo/NCCL ranks).

May import: ``gtalib.model``, ``gtalib.kernels``. Read by the CLI (``gtalib decode``),
the benchmarks and the decode notebook.
"""
