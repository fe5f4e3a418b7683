"""The kernel families the template library covers, in the order the analysis tries them."""

from __future__ import annotations

from types import ModuleType

from . import histogram, matmul, reduction, softmax, stencil, transpose

FAMILIES: tuple[ModuleType, ...] = (matmul, softmax, reduction, transpose, stencil, histogram)
BY_NAME: dict[str, ModuleType] = {m.NAME: m for m in FAMILIES}
FAMILY_NAMES: tuple[str, ...] = tuple(m.NAME for m in FAMILIES)
