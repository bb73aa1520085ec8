"""The book layer: the paper's figures regenerated as the pages of a Jupyter Book.

Four folders, each importing only those before it:

================  =============================================================================
folder            what
================  =============================================================================
``design``        the book as data: paper values, figures, claims, seeds, chapters, runs, plan
``analysis``      statistics, curves, run collection and style shared by every chapter
``chapters``      one module per page: its analysis, figure, tables and words
``pipeline``      the main job: runs on Dask, notebooks through papermill, the generated pages
================  =============================================================================

May import: ``gtalib.training``, ``gtalib.decode``, ``gtalib.model``, ``gtalib.data``,
``gtalib.kernels``. Read only by the CLI.
"""
