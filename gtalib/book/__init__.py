"""The book layer: each paper figure as data, one module per chapter (its analysis and its plots),
the shared statistics, curves, run collection and style, the tables and the main job.

=================  ===========================================================================
module             what
=================  ===========================================================================
``figures``        the paper's figures and tables as data (runs, arms, reference values, claims)
``ladders``        the scale ladder's design as data (depths, widths, lengths, variants, arms)
``specs``          a figure's runs as run specs (training settings, corpus data spec, RunSpec)
``stats``          t statistics, paired intervals, what n pairs resolve, the verdict rule
``curves``         paired ΔL curves, smoothing, the band over seeds, final values, plateau escape
``collect``        runs from the store and the records, arms paired by seed, the pages' run notices
``style``          what every figure and table shares (seaborn style, markers, table styling)
``ablation``       the ablation chapters: curves, final-ΔL table and verdicts, figure, caption
``probes_page``    the gating page's gate probes: read, summarised, explained, shown
``main_results``   the main table per held-out source, the entropy gap, the figure
``claims``         the claims table (one aggregation rule for every claim) and its page
``ladder``         the scale ladder: points, sentences, figure, table
``width``          the ladder's width axis: MLRA-4's gap to the best other variant, its table
``kv_cache``       the KV-cache page's tables
``decode_speed``   the decode-speed page's figure and tables
``tables``         the parameter and per-device KV tables (``gtalib tables``)
``params``         the notebooks' parameters, validated in one place
``plan``           a preset resolved once: its runs, tokenizer, training settings, chapters
``job``            the main job: corpus → runs → papermill notebooks → Jupyter Book HTML
``budget``         what each run costs on this machine (calibration), which fit the time budget
``schedule``       training the book's missing runs on a Dask cluster (embedded, tcp, Slurm)
``notebooks``      executing the notebooks with papermill (parameters, kernels, cell timeout)
``snippets``       the generated Markdown of the methods and reproduction chapters
``layout``         the book's folders (repository, ``book/``, ``notebooks/``), ``BookError``
=================  ===========================================================================

May import: ``gtalib.training``, ``gtalib.decode``, ``gtalib.model``, ``gtalib.data``,
``gtalib.kernels``. Read only by the CLI.
"""
