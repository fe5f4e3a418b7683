"""Every stack byte a launcher reads must be one this call wrote first, on every path.

The harness calls the editable part's launcher from the same place in every call, so the dead
stack below the harness's frame is, for a caller that calls the launcher in a tight loop, what
the launcher's previous call left there. A launcher that reads a local before writing it (a
`volatile` array read first, a frame deeper than any scrub) keeps a count between calls that no
state digest sees, and can act on it from the Nth call of a process on (red team round 199):
the verifier's calls, each started from scrubbed stack, would never see it act.

So the host-code scan's frame model, which already places every stack access of the part's
host code at a fixed offset from the function's entry stack pointer (indexed stack accesses are
refused), feeds this definite-assignment analysis: along every path from a function's entry, a
byte below its return address is written when a store, a push or a runtime call's output pointer
covers it, and a call forgets everything below the stack pointer (the callee's frames). A read
of a byte that some path reaches unwritten is refused, as is a runtime call that reads such a
byte through a pointer (a copy to the device, an argument block) and a call of the part's own
function whose stack-passed arguments are not all written. Offsets at and above the return
address (the return address, stack-passed arguments) are the caller's: other rules bound them.

A `pop` of a slot the call never wrote is how compilers release alignment padding (`sub $8,%rsp;
push ...; call ...; pop; pop`): it is not refused, but the register it fills holds an earlier
call's leftover until it is set again, and using it is refused like the read itself: any
instruction that reads it, a call of the part's own function while it is an argument register, a
return while it is callee-saved, or a return register of a function the part's own code calls.

Code reached only by the unwinder (a landing pad) starts from what every call of its function
leaves. The analysis is per function: a callee may not write its caller's frame (the scan refuses
stores outside a function's own frame), so nothing else writes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .x86 import Instruction

Key = tuple[str, int]  # (section, address)
Intervals = tuple[tuple[int, int], ...]  # sorted, disjoint, half-open byte ranges below the return address


@dataclass
class Step:
    """One instruction as the frame model saw it."""
    group: str  # the function, its cold part joined to it (they share one frame)
    frame: int  # bytes below the entry stack pointer before the instruction runs
    insn: Instruction
    function_start: bool = False  # the first instruction of a function that is not a cold part


@dataclass
class FrameTrace:
    """What the host-code scan records for this analysis, in listing order."""
    steps: dict[Key, Step] = field(default_factory=dict)
    order: list[Key] = field(default_factory=list)
    direct: set[Key] = field(default_factory=set)  # branches whose target the instruction itself holds
    relocated_targets: dict[Key, Key] = field(default_factory=dict)  # a branch's target, from its relocation
    no_return: set[Key] = field(default_factory=set)  # calls after which nothing runs but a landing pad
    unwinder_entries: set[Key] = field(default_factory=set)  # code with no known way in
    call_writes: dict[Key, list[tuple[int, int]]] = field(default_factory=dict)  # (offset, bytes) a call writes
    call_reads: dict[Key, list[tuple[int, int]]] = field(default_factory=dict)  # (offset, bytes) a call reads
    own_stack_arguments: dict[Key, int] = field(default_factory=dict)  # bytes of stack arguments an own callee reads
    harness_called: set[str] = field(default_factory=set)  # launchers the harness calls (it ignores what they return)
    own_callees: set[str] = field(default_factory=set)  # functions the part's own code calls or jumps to


@dataclass(frozen=True)
class UnwrittenRead:
    function: str
    instruction: str
    offset: int  # from the entry stack pointer (negative: the function's own frame)
    size: int
    how: str  # "reads", "passes to <callee>"


def _add(have: Intervals, lo: int, hi: int) -> Intervals:
    hi = min(hi, 0)
    if lo >= hi:
        return have
    out: list[tuple[int, int]] = []
    for a, b in have:
        if b < lo or a > hi:
            out.append((a, b))
        else:
            lo, hi = min(lo, a), max(hi, b)
    out.append((lo, hi))
    return tuple(sorted(out))


def _below(have: Intervals, limit: int) -> Intervals:
    """Forget every byte below `limit` (a call's callee owns the stack below the stack pointer)."""
    return tuple((max(a, limit), b) for a, b in have if b > limit)


def _meet_intervals(a: Intervals, b: Intervals) -> Intervals:
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _covers(have: Intervals, lo: int, hi: int) -> bool:
    hi = min(hi, 0)
    return lo >= hi or any(a <= lo and hi <= b for a, b in have)


def _is_probe(insn: Instruction) -> bool:
    """`or $0,mem`: gcc's stack-clash probe touches a new page and changes nothing it reads."""
    return insn.mnemonic == "or" and insn.text.replace(" ", "").startswith(("orq$0x0,", "orl$0x0,", "or$0x0,"))


def _stack_accesses(step: Step, accesses) -> list[tuple[int, int]]:
    return [(a.displacement - step.frame, a.size or 8) for a in accesses
            if a.base == "rsp" and not a.index and a.segment not in ("fs", "gs")]


_CALLEE_SAVED = frozenset({"rbx", "rbp", "r12", "r13", "r14", "r15"})
_RETURN_REGISTERS = frozenset({"rax", "rdx"})
_ARGUMENT_REGISTERS = frozenset({"rdi", "rsi", "rdx", "rcx", "r8", "r9", "rax"})  # %al: a variadic call's count
_CALLER_SAVED = frozenset({"rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11"})


@dataclass(frozen=True)
class _State:
    written: Intervals = ()  # frame bytes every path has written
    stale: frozenset[str] = frozenset()  # registers some path filled from an unwritten slot


def _meet(a: _State, b: _State) -> _State:
    return _State(_meet_intervals(a.written, b.written), a.stale | b.stale)


def _after(step: Step, key: Key, state: _State, trace: FrameTrace) -> _State:
    insn = step.insn
    if _is_probe(insn):
        return state
    written, stale = state.written, state.stale - insn.replaced_registers
    if insn.mnemonic == "pop":
        filled = insn.written_registers - {"rsp"}
        if any(not _covers(written, o, o + n) for o, n in _stack_accesses(step, insn.reads)):
            stale = stale | filled
    if insn.flow in ("call", "indirect-call"):
        written = _below(written, -step.frame)  # the return address, then the callee's frames
        for offset, size in trace.call_writes.get(key, ()):
            written = _add(written, offset, offset + size)
        if key not in trace.own_stack_arguments:  # a library call sets its caller-saved registers
            stale = stale - _CALLER_SAVED
        return _State(written, stale)
    for offset, size in _stack_accesses(step, insn.writes):
        written = _add(written, offset, offset + size)
    return _State(written, stale)


def _successors(key: Key, index: dict[Key, int], trace: FrameTrace) -> list[Key]:
    step = trace.steps[key]
    flow = step.insn.flow
    out: list[Key] = []
    if flow in ("branch", "conditional"):
        target = trace.relocated_targets.get(key)
        if target is None and key in trace.direct and step.insn.branch_target is not None:
            target = (key[0], step.insn.branch_target)
        if target is not None and target in trace.steps and trace.steps[target].group == step.group:
            out.append(target)
    falls = flow in ("next", "conditional") or (flow == "call" and key not in trace.no_return)
    if falls:
        position = index[key] + 1
        if position < len(trace.order):
            following = trace.order[position]
            if following[0] == key[0] and trace.steps[following].group == step.group \
                    and following not in trace.unwinder_entries:
                out.append(following)
    return out


def _states(trace: FrameTrace) -> dict[Key, _State]:
    """The state on entry to every instruction: what all paths to it agree on."""
    index = {key: i for i, key in enumerate(trace.order)}
    successors = {key: _successors(key, index, trace) for key in trace.order}
    entries = {key for key, step in trace.steps.items() if step.function_start}
    into: dict[Key, _State] = {key: _State() for key in entries}
    groups: dict[str, list[Key]] = {}
    for key in trace.order:
        groups.setdefault(trace.steps[key].group, []).append(key)
    landing: dict[str, _State] = {}
    while True:
        for key in trace.unwinder_entries:
            start = landing.get(trace.steps[key].group)
            if key in entries or start is None:
                continue
            into[key] = _meet(into[key], start) if key in into else start
        pending = [key for key in trace.order if key in into]
        while pending:
            key = pending.pop()
            out = _after(trace.steps[key], key, into[key], trace)
            for nxt in successors[key]:
                merged = out if nxt not in into else _meet(into[nxt], out)
                if nxt not in into or merged != into[nxt]:
                    into[nxt] = merged
                    pending.append(nxt)
        # A landing pad runs after any call of its function that throws: what all of them leave.
        changed = False
        for group, keys in groups.items():
            start: _State | None = None
            for k in keys:
                if k in into and trace.steps[k].insn.flow == "call":
                    state = _after(trace.steps[k], k, into[k], trace)
                    start = state if start is None else _meet(start, state)
            start = _State() if start is None else start
            if landing.get(group) != start:
                landing[group] = start
                changed = True
        if changed:
            continue
        # Code no modelled path reaches still runs if a way in was missed: from nothing written.
        unreached = [key for key in trace.order if key not in into and key not in trace.unwinder_entries]
        if not unreached:
            return into
        for key in unreached:
            into[key] = _State()


def unwritten_reads(trace: FrameTrace) -> list[UnwrittenRead]:
    """Reads of frame bytes that some path from the function's entry reaches unwritten, and uses of
    registers filled from such bytes."""
    found: list[UnwrittenRead] = []
    states = _states(trace)
    for key in trace.order:
        state, step = states[key], trace.steps[key]
        insn = step.insn
        reads: list[tuple[int, int, str]] = []
        if not _is_probe(insn) and insn.mnemonic not in ("ret", "pop"):
            reads += [(offset, size, "reads") for offset, size in _stack_accesses(step, insn.reads)]
        if insn.flow == "call":
            reads += [(offset, size, "passes a call") for offset, size in trace.call_reads.get(key, ())]
            needed = trace.own_stack_arguments.get(key, 0)
            if needed:
                reads.append((-step.frame, needed, "passes its own callee as stack-passed arguments"))
        for offset, size, how in reads:
            if not _covers(state.written, offset, offset + size):
                found.append(UnwrittenRead(function=step.group, instruction=insn.text, offset=offset, size=size,
                                           how=how))
        used = insn.read_registers & state.stale
        if insn.flow == "call" and key in trace.own_stack_arguments:
            used |= _ARGUMENT_REGISTERS & state.stale
        if insn.flow == "return":
            harness_only = step.group in trace.harness_called and step.group not in trace.own_callees
            used |= state.stale & (_CALLEE_SAVED if harness_only else _CALLEE_SAVED | _RETURN_REGISTERS)
        for register in sorted(used - {"rsp"}):
            found.append(UnwrittenRead(function=step.group, instruction=insn.text, offset=0, size=8,
                                       how=f"uses %{register}, popped from a slot that some path has not written"))
    return found
