"""The long-tailed PLL methods after SoLar, for pllzoo.

* ``records`` — RECORDS (Hong et al., ICLR 2023): a parameter-free dynamic rebalancing of any label
  update: the classifier head on a momentum mean of the training features estimates the training
  prior, whose log is subtracted from the logits the label update reads and from the test logits.
  Published on top of CORR (``pllzoo_baselines.corr``); here a component for any method.
* ``htc`` — HTC (Jia et al., AAAI 2024): head and tail classifiers on one backbone, fused by a
  learned weighting.
* ``plugin`` — registration.
"""
