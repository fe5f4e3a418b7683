"""The offline optimizer: parameterized templates from exemplars/templates, instantiated for a
kernel whose launcher and structure they fit, ranked by a static cost model. No network, no LLM.

    from kernelloop.optimizers.offline import OfflineOptimizer
    proposal = OfflineOptimizer().propose(request)
"""

from .optimizer import OfflineOptimizer

__all__ = ["OfflineOptimizer"]
