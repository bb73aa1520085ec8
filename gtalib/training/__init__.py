"""The training layer: training settings, the Lightning loop, the run store, recorded runs, the
gate probes and the machine kind.

May import: ``gtalib.model``, ``gtalib.data``, ``gtalib.kernels``. Read by the book and the CLI.

=================  ===========================================================================
module             what
=================  ===========================================================================
``config``         ``TrainConfig`` (frozen) and the training presets (``train_config``)
``loop``           the ``LightningModule`` (``LitGPT``), optimiser, schedule, ``fit``
``runs``           the run store: ``RunSpec`` and its hash, run folders, metrics and cards,
                   locks, ``ensure_run`` (train, resume or reuse), ``ensure_runs``
``probes``         gate probes of a trained model (mean gate, first-token share, max |h|);
                   ``ensure_run`` asks for them through ``runs``'s finishing hook
``records``        bundles of finished runs kept in ``book/recorded/``; re-training checks
``machine``        the machine kind that decides fp32 bit-identity (imports nothing of gtalib)
=================  ===========================================================================

Inside the layer the arrows point one way: ``records`` → ``probes`` → ``runs`` → ``loop`` →
``config``, and ``machine`` at the bottom.
"""
