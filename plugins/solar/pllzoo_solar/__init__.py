"""SoLar for pllzoo: Sinkhorn label refinery, class-prior estimation, class-wise selection.

Wang, Wu, Zhao, Chen — "SoLar: Sinkhorn Label Refinery for Imbalanced Partial-Label
Learning", NeurIPS 2022.  One file per idea: ``sinkhorn`` (the OT solver),
``refinery`` (label update), ``prior`` (estimator and stages), ``selection``,
``loss``, ``predict`` (SoLar-LA), ``recipes`` (the paper's variants), ``plugin``
(registration).
"""
