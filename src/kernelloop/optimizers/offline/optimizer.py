"""The offline optimizer: deterministic, no network, one template instantiation per proposal.

propose(): analyse the baseline (cached), instantiate every template configuration that fits
its family (cached), rank them (ranking.py) against what this run already learned, then walk
the ranking best-first: a candidate not yet checked is compiled by ptxas (cached) and scored
again with its real registers; one that does not compile, spills or cannot launch is skipped;
the first checked candidate still ahead of the rest is proposed. When no template fits, or
every template candidate was tried, the generic tiers propose their rewrites: the row tier
(rowwarp.py: a kernel that gives each thread one row, rewritten to give each warp one row; rowstride.py:
the same for rows dealt out by a grid-stride loop) and
the column tier (colsplit.py: a thread-per-item reduction read coalesced, shared by several
threads per item), the remap tier (remap.py: a thread-per-element kernel whose index split
puts neighbouring threads a row apart, split the other way) and the axis tier (axes.py: a kernel
of 2-D or 3-D blocks whose x axis walks the slow index, its x and fast axes swapped) and the loop
tier (loops.py: a kernel whose threads each run a loop over the fast index of what they store, its
independent iterations spread over the lanes of a block per thread) and the grid
tier (gridstride.py: a grid-stride kernel launched on fewer threads than elements, on a grid
that covers them) and the atomics tier (privatize.py: integer atomics into small tables, kept in
private per-block copies in shared memory and added once per block) and the block tier
(packing.py: a kernel launched on blocks of a few threads, its threads packed into full blocks)
and the transpose tier (transposes.py: a thread-per-element kernel whose 1-D index is split by / and
% into (batch, row, col), storing an elementwise function of its one loaded element, uniform
values and constants at the transposed place, rewritten as a 32 x 32 shared-memory tiled transpose
per batch slice in the kernel's own element type).
"""

from __future__ import annotations

import hashlib
import heapq
import time
from pathlib import Path

from ...config import OptimizeSettings
from ...program.split import split_program
from ...tools.resources import GpuLimits, gpu_limits
from ..base import NoMoreCandidates, OptimizeRequest, Proposal
from .analysis import Analysis, analyze, names_the_rewrite_adds
from .candidates import Candidate, build
from .families import BY_NAME
from .probe import ResourceProbe
from .ranking import History, Ranked, rank, rescore, sm_count
from .colsplit import column_split_rewrites
from .loops import loop_rewrites
from .axes import axis_rewrites
from .gridstride import grid_rewrites
from .packing import packing_rewrites
from .privatize import privatization_rewrites
from .remap import remap_rewrites
from .transposes import transpose_rewrites
from .rowstride import row_stride_rewrites
from .rowwarp import Rewrite, row_warp_rewrites
from .templates import Template, load_templates

MAX_PROBES_PER_PROPOSAL = 4  # ptxas runs (about 0.6 s each, cached) one proposal may spend


class OfflineOptimizer:
    name = "offline"

    def __init__(self, settings: OptimizeSettings | None = None, templates_dir: Path | None = None, *,
                 cache_dir: Path | None = None) -> None:
        self.settings = settings or OptimizeSettings()
        self.templates: dict[str, Template] = load_templates(templates_dir)
        self.probe = ResourceProbe(cache_dir)
        self._analyses: dict[str, Analysis] = {}
        self._built: dict[tuple[str, int], tuple[list[Candidate], list[str]]] = {}
        self._proposed: dict[str, dict[str, int]] = {}  # baseline key -> label -> first iteration
        self._generic_rewrites: dict[str, tuple[list[Rewrite], list[str]]] = {}

    # -- public ----------------------------------------------------------------------------------
    def propose(self, request: OptimizeRequest) -> Proposal:
        started = time.perf_counter()
        preamble, harness, exported = _context(request)
        key = _baseline_key(request.baseline_editable, preamble, harness, exported)
        analysis = self.analysis(request.baseline_editable, harness, exported, preamble, key)
        rewrites, refused = self._rewrites(key, analysis, harness, preamble, request.baseline_editable)
        failed_labels = {f.approach for f in request.failed_attempts}
        why_not = analysis.no_fit_message() if not analysis.matches else ""
        if analysis.matches:
            try:
                return self._propose_template(request, key, analysis, preamble, harness, failed_labels, started)
            except NoMoreCandidates as exc:
                why_not = str(exc)
        for rewrite in rewrites:  # the generic tier: after every template, or where none fits
            if not self._tried(key, rewrite.label, request.iteration, failed_labels):
                self._proposed.setdefault(key, {}).setdefault(rewrite.label, request.iteration)
                notes = [f"{rewrite.detail} (launched by {rewrite.launcher})"] + ([why_not] if why_not else [])
                return Proposal(source=rewrite.source, approach=rewrite.label, optimizer=self.name,
                                thinking_s=time.perf_counter() - started, notes=notes)
        if rewrites:
            why_not += f" | the generic tiers' {len(rewrites)} rewrite(s) were tried"
        elif refused and not analysis.matches:
            why_not += " | " + "; ".join(refused)
        raise NoMoreCandidates(why_not)

    def _propose_template(self, request: OptimizeRequest, key: str, analysis: Analysis, preamble: str, harness: str,
                          failed_labels: set[str], started: float) -> Proposal:
        limits = gpu_limits(request.arch)
        sms = sm_count(request.gpu_name, request.arch)
        candidates, unusable = self._candidates(key, analysis, request.baseline_editable, preamble, harness, sms)
        if not candidates:
            raise NoMoreCandidates(f"no template could be instantiated: {unusable[0]}")
        history = History.from_request(request, candidates)
        for label, first in self._proposed.get(key, {}).items():
            # Proposed in an earlier round and never reported as failed: it was accepted (keep-going).
            if first < request.iteration and label not in failed_labels:
                history.tried.add(label)
        ranked = rank(candidates, history, request.diagnosis, limits, sms)
        choice, probe_notes = self._choose(ranked, history, preamble, request, limits, sms)
        if choice is None:
            raise NoMoreCandidates(_exhausted(candidates, probe_notes))
        self._proposed.setdefault(key, {}).setdefault(choice.cand.label, request.iteration)
        notes = _notes(choice, request, history, probe_notes, self.probe.unavailable)
        return Proposal(source=choice.cand.source, approach=choice.cand.label, optimizer=self.name,
                        thinking_s=time.perf_counter() - started, notes=notes)

    def _tried(self, key: str, label: str, iteration: int, failed_labels: set[str]) -> bool:
        """Reported as failed, or proposed in an earlier round and never reported as failed: it
        was accepted (keep-going)."""
        first = self._proposed.get(key, {}).get(label)
        return label in failed_labels or (first is not None and first < iteration)

    def _rewrites(self, key: str, analysis: Analysis, harness: str, preamble: str,
                  editable: str) -> tuple[list[Rewrite], list[str]]:
        if key not in self._generic_rewrites:
            rows, rows_refused = row_warp_rewrites(analysis.part, harness, preamble)
            strided, strided_refused = row_stride_rewrites(analysis.part, harness, preamble)
            columns, columns_refused = column_split_rewrites(analysis.part, harness, preamble)
            # The remap, axis, grid and atomics tiers keep every expression of the kernel as written
            # (they move threads, not arithmetic): a kernel that converts values (a float-to-int bin
            # number, an integer checksum, a templated accumulator) is read by them too.
            as_written = analysis.part_as_written or analysis.part
            remaps, remaps_refused = remap_rewrites(as_written, harness, preamble)
            swaps, swaps_refused = axis_rewrites(as_written, harness, preamble)
            loops, loops_refused = loop_rewrites(as_written, harness, preamble)
            grids, grids_refused = grid_rewrites(as_written, harness, preamble)
            privates, privates_refused = privatization_rewrites(as_written, harness, preamble)
            packs, packs_refused = packing_rewrites(as_written, harness, preamble)
            transposes, transposes_refused = transpose_rewrites(as_written, harness, preamble)
            kept, refused = [], list(dict.fromkeys(rows_refused + strided_refused + columns_refused + remaps_refused + swaps_refused
                                                   + loops_refused + grids_refused + privates_refused + packs_refused
                                                   + transposes_refused))  # one line per kernel, not per launch
            for rewrite in transposes + rows + strided + columns + remaps + swaps + loops + grids + privates + packs:
                clash = names_the_rewrite_adds(editable, preamble, harness, rewrite.source)
                if clash:
                    refused.append(f"{rewrite.label}: its code calls {clash[0]}, which the program declares itself")
                else:
                    kept.append(rewrite)
            self._generic_rewrites[key] = (kept, refused)
        return self._generic_rewrites[key]

    def candidates(self, request: OptimizeRequest) -> list[Candidate]:
        """Every template instantiation that fits the request's baseline, unranked."""
        preamble, harness, exported = _context(request)
        key = _baseline_key(request.baseline_editable, preamble, harness, exported)
        analysis = self.analysis(request.baseline_editable, harness, exported, preamble, key)
        return self._candidates(key, analysis, request.baseline_editable, preamble, harness,
                                sm_count(request.gpu_name, request.arch))[0]

    def analysis(self, editable: str, harness: str, exported: list[str], preamble: str,
                 key: str | None = None) -> Analysis:
        key = key or _baseline_key(editable, preamble, harness, exported)
        if key not in self._analyses:
            self._analyses[key] = analyze(editable, harness, exported, preamble)
        return self._analyses[key]

    # -- internals -------------------------------------------------------------------------------
    def _candidates(self, key: str, analysis: Analysis, editable: str, preamble: str, harness: str,
                    sms: int) -> tuple[list[Candidate], list[str]]:
        if (key, sms) in self._built:
            return self._built[(key, sms)]
        out: list[Candidate] = []
        unusable: list[str] = []
        for match in analysis.matches:
            family = BY_NAME[match.family]
            for config in family.configs(match, sms):
                template = self.templates.get(config.template)
                if template is None:
                    unusable.append(f"template {config.template} is missing from the library")
                    continue
                made = build(match, config, template, analysis.part, editable, preamble, harness)
                clash = names_the_rewrite_adds(editable, preamble, harness, made.source) if not isinstance(made, str) else []
                if isinstance(made, str):
                    unusable.append(f"{config.label}: {made}")
                elif clash:
                    unusable.append(f"{config.label}: its code calls {clash[0]}, which the program declares itself")
                else:
                    out.append(made)
        if len(analysis.matches) > 1:  # several launchers fit: say which one each candidate rewrites
            out = [Candidate(c.match, c.config, c.template, c.source, f"{c.label} ({c.match.launcher.fn.name})",
                             c.prefix) for c in out]
        self._built[(key, sms)] = (out, unusable)
        return out, unusable

    def _choose(self, ranked: list[Ranked], history: History, preamble: str, request: OptimizeRequest,
                limits: GpuLimits, sms: int) -> tuple[Ranked | None, list[str]]:
        """The best untried candidate that ptxas builds without spills, with notes on what was skipped."""
        notes: list[str] = []
        heap = [(r.key(), i, r) for i, r in enumerate(ranked)]
        heapq.heapify(heap)
        counter = len(heap)
        probes = 0
        while heap:
            _, _, r = heapq.heappop(heap)
            if history.is_tried(r.cand):
                continue
            if r.probed or probes >= MAX_PROBES_PER_PROPOSAL:
                return r, notes
            probes += 1
            result = self.probe.check(f"{preamble}\n{r.cand.source}", request.arch)
            if result is None:  # no nvcc: rank without resource usage
                return r, notes
            if not result.ok:
                notes.append(f"skipped {r.cand.label}: ptxas could not compile it ({result.error})")
                name = r.cand.template.name
                if name not in history.broken:  # one config failing to build condemns the template's text
                    history.broken[name] = "compile"
                    heap = [(_requeue(e, name), i, e) for _, i, e in heap]
                    heapq.heapify(heap)
                continue
            kernels = [k for k in result.kernels if k.is_kernel and r.cand.prefix in k.demangled]
            spilling = [k for k in kernels if k.spills or k.local_bytes]
            if not kernels or spilling:
                why = f"{spilling[0].demangled} spills" if spilling else "no template kernel in the ptxas report"
                notes.append(f"skipped {r.cand.label}: {why}")
                continue
            registers = max(k.registers or 0 for k in kernels)
            shared = max(k.static_shared_bytes for k in kernels)
            rescore(r, registers, shared, request.diagnosis, limits, sms, history)
            if r.score <= 0:
                notes.append(f"skipped {r.cand.label}: {r.reasons[-1]}")
                continue
            r.reasons.append(f"ptxas ({request.arch}): {registers} registers, {shared} B static shared memory, "
                             f"no spills")
            counter += 1
            heapq.heappush(heap, (r.key(), counter, r))
        return None, notes


def _requeue(r: Ranked, broken_template: str) -> tuple:
    if r.cand.template.name == broken_template:
        r.level = 2
    return r.key()


def _baseline_key(editable: str, preamble: str, harness: str, exported: list[str]) -> str:
    return hashlib.sha256("\0".join([editable, preamble, harness, *exported]).encode()).hexdigest()


def _context(request: OptimizeRequest) -> tuple[str, str, list[str]]:
    """Preamble, harness and exported declarations: from the request, or split from the program."""
    if request.harness or not request.program:
        return request.preamble, request.harness, list(request.exported)
    split = split_program(request.program, request.kernel_name or "program")
    return split.preamble, split.harness, split.exported


def _exhausted(candidates: list[Candidate], probe_notes: list[str]) -> str:
    kernels = ", ".join(sorted({c.match.kernel for c in candidates}))
    per_template: dict[str, int] = {}
    for c in candidates:
        per_template[c.template.name] = per_template.get(c.template.name, 0) + 1
    summary = ", ".join(f"{name} x{n}" for name, n in sorted(per_template.items()))
    tail = f"; last skip: {probe_notes[-1]}" if probe_notes else ""
    return f"all {len(candidates)} offline candidates for kernel {kernels} were tried or ruled out ({summary}){tail}"


def _notes(choice: Ranked, request: OptimizeRequest, history: History, probe_notes: list[str],
           unavailable: str | None) -> list[str]:
    m, cand = choice.cand.match, choice.cand
    family = BY_NAME[m.family]
    notes = [f"{m.family} recognized in kernel {m.kernel} (launched by {m.launcher.fn.name}): {m.detail}",
             "roles: " + ", ".join(f"{role}={m.described[role]}" for role in family.ROLES)]
    known = {r: v for r, v in m.sizes.items() if v is not None}
    if known:
        notes.append("problem size from the harness: " + ", ".join(f"{r}={v}" for r, v in known.items()))
    else:
        notes.append("problem size not fixed by the harness: ranked with the grid size unknown")
    if m.zeroing:
        notes.append("zeroing kept before the launch: " + " ".join(m.zeroing))
    why = ["the best-known configuration (the GPU-verified exemplar's)"] if cand.config.best_known else []
    why.append(f"expected {cand.config.prior:.1f}x over a naive kernel, score {choice.score:.2f}")
    notes.append("ranked first: " + "; ".join(why + choice.reasons))
    notes += history.notes
    notes += probe_notes
    if unavailable:
        notes.append(f"ptxas unavailable, resources not checked: {unavailable}")
    return notes
