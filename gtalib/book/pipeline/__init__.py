"""The main job: corpus → runs on a Dask cluster → papermill notebooks → Jupyter Book HTML.

================  ===============================================================================
module            what
================  ===============================================================================
``paths``         the book's folders (repository, ``book/``, ``notebooks/``) and ``BookError``
``parameters``    the notebooks' parameters, validated in one place
``calibration``   how fast this machine trains: short timed steps, compared with the records
``budget``        what each run costs on this machine, which fit the time budget
``pace``          the training's deadline: the pace per step shape, runs dropped and taken back
``schedule``      training the book's missing runs on a Dask cluster (embedded, tcp, Slurm)
``stops``         how that training stops early: a lost scheduler, a full run store
``execute``       executing the notebooks with papermill (parameters, kernels, cell timeout)
``snippets``      the generated Markdown of the methods and reproduction pages
``job``           the whole build, in order
================  ===============================================================================

May import: ``gtalib.book.design``, ``gtalib.book.analysis``, ``gtalib.book.chapters``,
``gtalib.training``,  ``gtalib.model``, ``gtalib.data``.
"""
