"""Optimizers: one interface (base.Optimizer), chosen with `--optimizer` (factory.make_optimizer)."""
