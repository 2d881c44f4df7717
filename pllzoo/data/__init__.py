"""Datasets for partial-label learning on long-tailed data.

One idea per module: :mod:`~pllzoo.data.base` (what a loader returns),
:mod:`~pllzoo.data.longtail` and :mod:`~pllzoo.data.candidates` (SoLar's generation),
:mod:`~pllzoo.data.cifar`, :mod:`~pllzoo.data.matfile`, :mod:`~pllzoo.data.synthetic`
(the loaders), :mod:`~pllzoo.data.splits`, :mod:`~pllzoo.data.validate`,
:mod:`~pllzoo.data.jpeg` (decode cache) and :mod:`~pllzoo.data.catalog` (the names).
"""
