"""The book layer: each paper figure as data, the analyses, the plots, the tables and the main job.

=================  ===========================================================================
module             what
=================  ===========================================================================
``figures``        the paper's figures and tables as data (runs, arms, reference values, claims)
``ladders``        the scale ladder's design as data (depths, lengths, variants, arms)
``specs``          a figure's runs as run specs (training settings, corpus data spec, RunSpec)
``analysis``       paired ΔL, t-intervals, verdicts, collected runs, the claims table
``plotting``       seaborn/matplotlib figures and styled tables for the notebooks
``tables``         the parameter and per-device KV tables (``gtalib tables``)
``params``         the notebooks' parameters, validated in one place
``plan``           a preset resolved once: its runs, tokenizer, training settings, chapters
``job``            the main job: corpus → runs → papermill notebooks → Jupyter Book HTML
``schedule``       training the book's missing runs (in one process or a process pool, ETA)
``notebooks``      executing the notebooks with papermill (parameters, kernels, cell timeout)
``snippets``       the generated Markdown of the methods and reproduction chapters
``layout``         the book's folders (repository, ``book/``, ``notebooks/``), ``BookError``
=================  ===========================================================================

May import: ``gtalib.training``, ``gtalib.decode``, ``gtalib.model``, ``gtalib.data``,
``gtalib.kernels``. Read only by the CLI.
"""
