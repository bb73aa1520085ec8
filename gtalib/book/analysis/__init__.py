"""What every chapter computes the same way: statistics, ΔL curves, runs collected from the store
and the records, and the shared style of figures and tables.

==============  ===============================================================================
module          what
==============  ===============================================================================
``stats``       t statistics, paired intervals, what n pairs resolve, the verdict rule
``final_table`` the final-ΔL table of a figure: interval, resolvable size, verdicts per look
``sequential``  the two-look group-sequential verdicts (O'Brien–Fleming spending, Holm per look)
``curves``      paired ΔL curves, smoothing, the band over seeds, final values, plateau escape
``collect``     runs from the store and the records, arms paired by seed, the pages' run notices
``style``       seaborn style, markers, table styling, the pages' number words
==============  ===============================================================================

May import: ``gtalib.book.design``, ``gtalib.training``, ``gtalib.model``, ``gtalib.data``.
"""
