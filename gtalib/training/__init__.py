"""The training layer: training settings, the Lightning loop, the run store, recorded runs, the
gate probes and the machine kind.

May import: ``gtalib.model``, ``gtalib.data``, ``gtalib.kernels``. Read by the book and the CLI.

=================  ===========================================================================
module             what
=================  ===========================================================================
``config``         ``TrainConfig`` (frozen) and the training presets (``train_config``)
``loop``           the ``LightningModule`` (``LitGPT``), optimiser, schedule, ``fit``
``runs``           the run store: ``RunSpec`` and its hash, run folders, ``metrics.csv`` written
                   and checked, cards and specs read back, the store's state
``probes``         gate probes of a trained model (mean gate, first-token share, max |h|)
``train``          training one run into the store: ``ensure_run`` (train, resume, reuse or
                   wait for another process), ``ensure_runs``; writes card, probes and ``DONE``
``records``        bundles of finished runs kept in ``book/recorded/``; re-training checks
``record_costs``   what the records cost per configuration (``docs/recorded_runs.md``)
``bundles``        a finished run as files in memory, handed from a cluster worker to a store
``machine``        the machine kind that decides fp32 bit-identity (imports nothing of gtalib)
``disk``           the store's disk: atomic writes, a full disk as one error, space per run
=================  ===========================================================================

Inside the layer the arrows point one way: ``record_costs`` → ``records`` → ``train`` → (``probes``, ``loop``) →
``runs`` → ``disk``, ``config``, ``machine``; ``bundles`` → ``runs``. The store never imports the probes: the training of a run
asks for them once the run is trained.
"""
