"""The book's design as data, fixed before any run is read: the paper's values, the figures and
claims, the seed policy, the chapters, the runs each figure needs and a preset resolved once.

===============  ================================================================================
module           what
===============  ================================================================================
``names``        display names, colours, option defaults and configuration labels
``paper``        the paper's reported values (main table, gating average, Qiu et al.'s probes)
``figures``      the ablation figures (arms, variants, paper values, rankings) and the claims
``figure_plan``  what a figure's spec plans, as its methods: variants, seeds, looks and runs
``seeds``        the seed counts across figures, and views of the specs' designs by preset
``chapters``     the chapter registry: every page of the book, its part, figure and inputs
``run_specs``    a run reference as a run spec (training settings, data spec)
``ladder``       the scale ladder's design (depths, widths, lengths, variants, arms) and runs
``spot_check``   the recorded runs every default book trains again first, and the training order
``plan``         a preset resolved once: its runs, tokenizer, training settings, chapters
===============  ================================================================================

May import: ``gtalib.training``, ``gtalib.model``, ``gtalib.data``. Nothing else of
``gtalib.book``.
"""
