"""``python -m gtalib.decode ...``: the tensor-parallel decode check (an entry point: the cli
layer, :mod:`gtalib.cli.decode`); under ``torchrun -m gtalib.decode`` each process is one rank."""

import sys

from gtalib.cli.decode import main

sys.exit(main())
