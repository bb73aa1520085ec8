"""One module per page of the book: its analysis, its figure, its tables and its words.

===================  ===============================================================================
module               what
===================  ===============================================================================
``ablation``         the ablation pages: curves, final-ΔL table and verdicts, figure, caption
``gate_probes``      the gating page's gate probes: read, summarised, explained, shown
``main_results``     the main table per held-out source, the entropy gap, the figure
``scale_ladder``     the scale ladder's depth and length axes: points, signs, figure, tables
``ladder_width``     the ladder's width axis: MLRA-4's gap to the best other variant, its table
``kv_cache``         the paper's parameter and per-device KV tables (also ``gtalib tables``)
``decode_speed``     the decode-speed page's figure and tables
``claims``           the claims table (one aggregation rule for every claim) and its page
``headline``         the introduction's headline: every claim in one line, the ablations' forest plot
``against_records``  this build's runs against their records, and the verdicts read both ways
``curve_features``   the curve figures read feature by feature; the data-order and joint-design tables
``verdict_parts``    the verdict's parts from those tables (feature counts, data-order changes)
``figure_tests``     each ablation claim for the whole figure: pooled ΔL, τ², I², the looks' verdict
``own_attention``    the page "Bring your own attention": the docs' class in the init figure at ci
``prose``            the numbers the pages' prose states, read from the data
``shared``           what one build computes once for all its pages: results, claims, derived tables
===================  ===============================================================================

May import: ``gtalib.book.design``, ``gtalib.book.analysis``, ``gtalib.training``,
``gtalib.decode``, ``gtalib.model``, ``gtalib.data``, ``gtalib.kernels``.
"""
