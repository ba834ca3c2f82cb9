"""Adaptive jobs: Pollux's goodput model (step time and statistical efficiency, fitted from
measurements) and the search over (GPU type, GPU count, nodes) configurations that the
adaptive schedulers (Pollux, Sia as its paper runs it) share. See ``docs/adaptive.md``."""
