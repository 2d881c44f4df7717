"""Baseline PLL methods for pllzoo, one file per method; ``plugin`` registers them."""
