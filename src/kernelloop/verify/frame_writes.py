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

Registers are the same channel (red team round 209: a count left in `%r9` by a tail call's last
argument, read at the next call's entry through a call of a six-argument function cast to none).
A function's general registers start undefined except those its callers set: for a launcher the
harness calls, its signature's integer arguments; for any other function, the argument registers
it reads before writing them (liveness over its code and its own callees'), which every call and
tail jump to it must have set. A call leaves the caller-saved registers undefined (the return
registers set). Undefined values may be moved (a push, a store to the frame, a register copy, a
load of an unwritten slot) but not used: an instruction that computes with one, stores it outside
the frame, or passes it to the part's own function is refused. This is how compilers' own
idioms pass: the alignment padding popped into a dead register (`sub $8,%rsp; push; call; pop;
pop`), callee-saved registers pushed and popped. A return with a popped-stale value in a
callee-saved register, or in a return register of a function the part's own code calls, is
refused. Vector registers are not followed (Known limits).

Code reached only by the unwinder (a landing pad) starts from what every call of its function
leaves. The analysis is per function: a callee may not write its caller's frame (the scan refuses
stores outside a function's own frame), so nothing else writes it.
"""

from __future__ import annotations

import re
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
    own_callee_of: dict[Key, str] = field(default_factory=dict)  # a call or tail jump of the part's own function
    required_reads: dict[Key, list[tuple[int, int]]] = field(default_factory=dict)  # a pointer load that must read written bytes
    # launchers the harness calls: how many integer and vector arguments it passes (None: a signature the scan
    # cannot read)
    harness_arguments: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    clobbers: dict[str, frozenset[str]] = field(default_factory=dict)  # computed: what each function may write
    wide_needs: dict[str, frozenset[str]] = field(default_factory=dict)  # computed: vector needs read whole
    own_callees: set[str] = field(default_factory=set)  # functions the part's own code calls or jumps to
    # computed: a bitwise or additive operation between registers whose flags nothing reads -> for each register
    # it reads, the bytes of it the result's later readers can see (_bottom_closed)
    narrowed: dict[Key, dict[str, int]] = field(default_factory=dict)


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


_GENERAL = frozenset({"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8", "r9", "r10", "r11", "r12", "r13",
                      "r14", "r15"})
_VECTOR = frozenset(f"zmm{i}" for i in range(32))  # the decoder names every xmm/ymm register by its zmm
_TRACKED = _GENERAL | _VECTOR
_CALLEE_SAVED = frozenset({"rbx", "rbp", "r12", "r13", "r14", "r15"})
_RETURN_REGISTERS = frozenset({"rax", "rdx", "zmm0", "zmm1"})
_INTEGER_ARGUMENTS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")
_VECTOR_ARGUMENTS = tuple(f"zmm{i}" for i in range(8))
_ENTRY_READABLE = frozenset(_INTEGER_ARGUMENTS) | frozenset(_VECTOR_ARGUMENTS) | {"rax"}  # %al: a variadic count
_CALLER_SAVED = frozenset({"rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11"}) | _VECTOR
_SAME_REGISTER_IDIOMS = ("xor", "sub", "pxor", "xorps", "xorpd", "vpxor", "vxorps", "vxorpd")
# whole registers: `xor %ax,%ax` sets 16 bits and keeps the rest (red team round 212)
_WHOLE_OPERAND = re.compile(r"^%(?:e[a-z]{2}|r[a-z]{2}|r\d+d?|[xyz]mm\d+)$")
_ALL_ONES = re.compile(r"^\$(?:-1|0x(?:F{8}|F{16}))$", re.IGNORECASE)  # of a 32- or 64-bit operand


@dataclass(frozen=True)
class _State:
    written: Intervals = ()  # frame bytes every path has written
    undefined: frozenset[str] = frozenset()  # registers some path has not set in this call
    stale: frozenset[str] = frozenset()  # ... of them, filled from a frame slot this call never wrote
    foreign: Intervals = ()  # written bytes that some path filled from an undefined register (a saved one)
    upper: frozenset[str] = _VECTOR  # vector registers whose bits 128 and up some path has not set
    # of the undefined general registers, those whose bottom bytes every path has set (an 8- or 16-bit
    # write: `sete %al`), with how many: a read of no more than that is no use of the rest
    low: frozenset[tuple[str, int]] = frozenset()


def _meet(a: _State, b: _State) -> _State:
    def bottom(state: _State) -> dict[str, int]:
        parts = dict(state.low)
        return {r: parts.get(r, 0) if r in state.undefined else 8 for r in _GENERAL}
    ours, theirs = bottom(a), bottom(b)
    undefined = a.undefined | b.undefined
    low = frozenset((r, min(ours[r], theirs[r])) for r in _GENERAL & undefined if min(ours[r], theirs[r]) > 0)
    return _State(_meet_intervals(a.written, b.written), undefined, a.stale | b.stale,
                  _join_intervals(a.foreign, b.foreign), a.upper | b.upper, low)


def _undefined_reads(insn: Instruction, state: _State, narrowed: dict[str, int] | None = None) -> frozenset[str]:
    """Registers the instruction reads past what is set of them (not the wide parts: see `upper`). NARROWED: the
    bytes of each register a bottom-closed operation's result can show (_bottom_closed)."""
    if _same_register(insn):
        return frozenset()
    parts = dict(state.low)
    carried = _selected_into(insn)
    narrowed = narrowed or {}
    general = {r for r, width in insn.general_reads if r in state.undefined
               and parts.get(r, 0) < min(width, narrowed.get(r, width)) and r not in carried}
    return frozenset(general - {"rsp"}) | (insn.read_registers & _VECTOR & state.undefined)


def _selected_into(insn: Instruction) -> frozenset[str]:
    """A conditional move's destination: read only to be kept where the condition fails, a select of bits and no
    computation with them, so what of it is undefined stays undefined in it (`setnp %al; cmovne %ecx,%eax;
    or %al,%dl`: gcc's `x == 0.0` on a double, whose bits 8-31 no one reads; kept-aside set 22 refused a BLAS
    launcher's `alpha == 0.0` early exit). A cmov that reads another undefined register still uses it."""
    if not insn.mnemonic.startswith("cmov"):
        return frozenset()
    return insn.written_registers & frozenset(r for r, _ in insn.general_reads)


_LOW_VECTOR = frozenset(f"zmm{i}" for i in range(16))  # what vzeroupper and vzeroall clear
# Operations whose result's bottom bytes depend only on the operands' bottom bytes (carries run upward).
_BOTTOM_CLOSED = frozenset({"and", "or", "xor", "add", "sub"})
_HIGH_BYTE = re.compile(r"%[abcd]h\b")


def _bottom_closed(key: Key, index: dict[Key, int], trace: FrameTrace) -> tuple[str, frozenset[str]] | None:
    """(destination, registers read) of `and %esi,%eax` and kin between general registers, where no flag it sets
    is read (on its straight-line path an instruction setting every status flag, a call or a return comes before
    any flag is read): its result's bottom bytes are its operands' bottom bytes, so bytes of an operand that
    nothing reads of the result are no use. gcc combines conditions so: `setge %sil; and %esi,%eax; ...; test %sil,%al` reads bits 8-31 of
    %esi only into bits of %eax nothing reads (kept-aside set 22's histogram: the offline optimizer's own
    guarded launch refused as reading what an earlier call left in %rsi)."""
    insn = trace.steps[key].insn
    if insn.mnemonic not in _BOTTOM_CLOSED or insn.reads or insn.writes or _same_register(insn):
        return None
    targets = insn.written_registers & _GENERAL
    sources = frozenset(r for r, _ in insn.general_reads)
    if len(targets) != 1 or not sources or not sources <= _GENERAL or insn.read_registers - sources & _TRACKED:
        return None
    if _HIGH_BYTE.search(insn.text):  # %ah is bits 8-15: not a bottom (red team round 290: `add %ah,%al`)
        return None
    position = index[key] + 1
    while position < len(trace.order):
        following = trace.order[position]
        step = trace.steps[following]
        if step.group != trace.steps[key].group:
            return None
        if step.insn.reads_flags:
            return None
        if step.insn.writes_all_flags or step.insn.flow in ("call", "return"):
            return next(iter(targets)), sources
        if step.insn.flow != "next":
            return None
        position += 1
    return None


def _join_intervals(a: Intervals, b: Intervals) -> Intervals:
    out = a
    for lo, hi in b:
        out = _add(out, lo, hi)
    return out


def _overlaps(have: Intervals, lo: int, hi: int) -> bool:
    return any(a < hi and lo < b for a, b in have)


def _same_register(insn: Instruction) -> bool:
    """`xor %eax,%eax` and kin, and `or $-1,%rax` / `and $0,%eax` (compilers' short forms of `mov $-1` and
    `mov $0`): a constant, whatever the register held."""
    operands = insn.text.split(None, 1)[1].replace(" ", "").split(",") if " " in insn.text else []
    if len(operands) != 2 or not _WHOLE_OPERAND.match(operands[1]) or operands[1].startswith(("%xmm", "%ymm", "%zmm")):
        return False
    if insn.mnemonic in _SAME_REGISTER_IDIOMS:
        return operands[0] == operands[1]
    return (insn.mnemonic == "or" and bool(_ALL_ONES.match(operands[0]))) or \
        (insn.mnemonic == "and" and operands[0] in ("$0", "$0x0"))


def _register_reads(insn: Instruction) -> frozenset[str]:
    return frozenset() if _same_register(insn) else (insn.read_registers & _TRACKED)


def _merged(insn: Instruction) -> frozenset[str]:
    """Vector registers an instruction reads only to keep the part it does not write (`cvtsi2ss`, `sqrtss`
    write the low lane and keep the rest): their undefined bits are carried, not used. Compilers clear the
    register first where it matters for speed; where they do not, what stays undefined is the upper part."""
    return insn.read_registers & insn.written_registers & _VECTOR - insn.replaced_registers


def _is_move(step: Step) -> bool:
    """A copy that uses no value: a push or pop of a register, a register-to-register `mov`, a store of a
    register into the frame, a load from the frame."""
    insn = step.insn
    if insn.mnemonic == "push":
        return not insn.reads
    if insn.mnemonic == "pop":
        return not insn.writes
    if insn.mnemonic != "mov":
        return False
    return all(a.base == "rsp" and not a.index for a in (*insn.reads, *insn.writes))


def _after(step: Step, key: Key, state: _State, trace: FrameTrace) -> _State:
    insn = step.insn
    if _is_probe(insn):
        return state
    written, undefined, stale, foreign, upper = state.written, state.undefined, state.stale, state.foreign, state.upper
    low = state.low
    if insn.mnemonic == "vzeroupper":  # keeps bits 0-127, clears the rest: no use of any register
        return _State(written, undefined, stale, foreign, upper - _LOW_VECTOR, low)
    targets = (insn.written_registers & _TRACKED)
    loads = _stack_accesses(step, insn.reads)
    loaded_stale = any(not _covers(written, o, o + n) for o, n in loads)
    loaded_foreign = any(_overlaps(foreign, o, o + n) for o, n in loads)
    source_undefined = bool(_undefined_reads(insn, state, trace.narrowed.get(key)))
    source_stale = bool(_register_reads(insn) - {"rsp"} & stale)
    if insn.flow in ("call", "indirect-call"):
        written = _below(written, -step.frame)  # the return address, then the callee's frames
        foreign = _below(foreign, -step.frame)
        for offset, size in trace.call_writes.get(key, ()):
            written, foreign = _add(written, offset, offset + size), _remove(foreign, offset, offset + size)
        clobbered = _clobbered(key, trace)
        results = clobbered & _RETURN_REGISTERS  # set, where a caller reads them (checked at the callee's returns)
        return _State(written, (undefined | clobbered) - results, stale - clobbered, foreign,
                      upper | (clobbered & _VECTOR), frozenset(x for x in low if x[0] not in clobbered))
    upper = upper - insn.replaced_registers  # a VEX or EVEX write clears bits 128 and up; a legacy one keeps them
    carried = _merged(insn) & undefined
    if carried:  # a lane written into an undefined vector register: the rest stays undefined
        return _State(written, (undefined - targets) | carried, (stale - targets) | (carried & stale), foreign, upper,
                      low)
    stores = _stack_accesses(step, insn.certain_writes)  # a masked store may write nothing (round 213)
    if _is_move(step) and (loaded_stale or loaded_foreign or source_undefined):
        # an undefined value copied: what it lands in is undefined too; a slot that holds a register's
        # entry value (a saved register) is written, but its bytes may not be used
        undefined = undefined | targets
        stale = (stale | targets) if (loaded_stale or source_stale) else (stale - targets)
        for offset, size in stores:
            if source_stale:
                written, foreign = _remove(written, offset, offset + size), _remove(foreign, offset, offset + size)
            else:
                written, foreign = _add(written, offset, offset + size), _add(foreign, offset, offset + size)
        return _State(written, undefined, stale, foreign, upper, frozenset(x for x in low if x[0] not in targets))
    # a whole write sets a register; an 8- or 16-bit one sets its bottom bytes only (round 212); a cmov keeps
    # what it selects from, undefined bits included
    whole = (insn.replaced_registers | insn.low_writes | (targets - _GENERAL)) - insn.conditional_registers \
        - (_selected_into(insn) & undefined)
    closed_from = dict(state.low)
    bottom = None
    if key in trace.narrowed:  # a bottom-closed result is set as far as every operand is
        bottom = min((8 if r not in state.undefined else closed_from.get(r, 0)) for r in trace.narrowed[key])
    undefined, stale = undefined - whole, stale - whole
    parts = {r: w for r, w in low if r not in whole}
    for register, width in insn.partial_writes:
        if register in undefined and width:
            parts[register] = max(parts.get(register, 0), width)
    if bottom is not None and bottom < 8:
        target = next(iter(insn.written_registers & _GENERAL))
        undefined = undefined | {target}
        parts = {r: w for r, w in parts.items() if r != target}
        if bottom:
            parts[target] = bottom
    for offset, size in stores:
        written, foreign = _add(written, offset, offset + size), _remove(foreign, offset, offset + size)
    return _State(written, undefined, stale, foreign, upper, frozenset(parts.items()))


def _clobbered(key: Key, trace: FrameTrace) -> frozenset[str]:
    """The caller-saved registers a call may change: all of them for a library call; for the part's own
    function, those it and its callees write (gcc keeps values in the others across it: -fipa-ra)."""
    callee = trace.own_callee_of.get(key)
    return _CALLER_SAVED if callee is None else trace.clobbers.get(callee, _CALLER_SAVED) & _CALLER_SAVED


def _writes(trace: FrameTrace) -> dict[str, frozenset[str]]:
    """For each function, the registers it or anything it calls may write."""
    writes: dict[str, frozenset[str]] = {}
    calls: dict[str, set[str]] = {}
    for key in trace.order:
        step = trace.steps[key]
        own = writes.get(step.group, frozenset()) | (step.insn.written_registers & _TRACKED)
        if step.insn.flow in ("call", "indirect-call", "branch"):
            callee = trace.own_callee_of.get(key)
            if callee is not None:
                calls.setdefault(step.group, set()).add(callee)
            elif step.insn.flow != "branch":
                own |= _CALLER_SAVED
        writes[step.group] = own
    changed = True
    while changed:
        changed = False
        for group, callees in calls.items():
            more = writes[group].union(*(writes.get(c, _CALLER_SAVED) for c in callees))
            if more != writes[group]:
                writes[group], changed = more, True
    return writes


def _remove(have: Intervals, lo: int, hi: int) -> Intervals:
    out: list[tuple[int, int]] = []
    for a, b in have:
        if b <= lo or a >= hi:
            out.append((a, b))
        else:
            if a < lo:
                out.append((a, lo))
            if b > hi:
                out.append((hi, b))
    return tuple(out)


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
    # an instruction that traps (`ud2`) is followed as if it fell through: whatever follows is judged
    falls = flow in ("next", "conditional", "exception") or (flow == "call" and key not in trace.no_return)
    if falls:
        position = index[key] + 1
        if position < len(trace.order):
            following = trace.order[position]
            if following[0] == key[0] and trace.steps[following].group == step.group \
                    and following not in trace.unwinder_entries:
                out.append(following)
    return out


_COPIES = ("mov", "movaps", "movapd", "movdqa", "movups", "vmovaps", "vmovapd", "vmovdqa", "vmovups", "vmovdqa64")


def _register_copy(insn: Instruction) -> tuple[str, str] | None:
    """(source, destination) of a `mov` between two general registers."""
    if insn.mnemonic not in _COPIES or insn.reads or insn.writes:
        return None
    sources, targets = _register_reads(insn) - {"rsp"}, insn.written_registers & _TRACKED
    return (next(iter(sources)), next(iter(targets))) if len(sources) == 1 and len(targets) == 1 else None


def _needs(trace: FrameTrace, successors: dict[Key, list[Key]]) -> tuple[dict[str, frozenset[str]],
                                                                        dict[str, frozenset[str]]]:
    """For each function, the argument registers it may use before setting them (what every caller must
    have set), and the return registers some caller reads after calling it (what it must set): liveness
    across the part's own calls, by the bytes of each general register read (a `sete %al` then
    `movzbl %al,%eax` needs nothing of %rax). A register copied to another that nothing reads is no use."""
    groups: dict[str, list[Key]] = {}
    for key in trace.order:
        groups.setdefault(trace.steps[key].group, []).append(key)
    needs = {group: frozenset() for group in groups}
    returned = {group: frozenset() for group in groups}
    index = {key: i for i, key in enumerate(trace.order)}
    bottom_closed = {key: closed for key in trace.order if (closed := _bottom_closed(key, index, trace)) is not None}

    def merge(into: dict[str, int], more: dict[str, int]) -> None:
        for register, width in more.items():
            into[register] = max(into.get(register, 0), width)

    changed = True
    while changed:
        changed = False
        for group, keys in groups.items():
            live: dict[Key, dict[str, int]] = {}
            moved = True
            while moved:
                moved = False
                for key in reversed(keys):
                    insn = trace.steps[key].insn
                    out: dict[str, int] = {}
                    if insn.flow == "return":
                        merge(out, {r: 64 for r in returned[group]})
                    else:
                        for n in successors[key]:
                            merge(out, live.get(n, {}))
                    uses: dict[str, int] = {}
                    if insn.mnemonic not in ("ud0", "ud1", "ud2", "vzeroupper") and not _same_register(insn):
                        carried = _selected_into(insn)  # what a cmov keeps: as much as is read of it later
                        closed = bottom_closed.get(key)  # an and/or/add whose flags nothing reads: likewise
                        if closed is not None and out.get(closed[0], 0) > 0:  # (a dead result: read as before)
                            trace.narrowed[key] = {r: out[closed[0]] for r in closed[1]}
                            carried = carried | closed[1]
                        else:
                            closed = None
                            trace.narrowed.pop(key, None)
                        merge(uses, {r: w for r, w in insn.general_reads if r != "rsp" and r not in carried})
                        if closed is not None:
                            merge(uses, {r: min(w, out[closed[0]]) for r, w in insn.general_reads if r in closed[1]})
                        merge(uses, {r: min(w, out[r]) for r, w in insn.general_reads
                                     if r in carried and r in out and (closed is None or r not in closed[1])})
                        merge(uses, {r: 64 for r in insn.read_registers & _VECTOR})
                    copy = _register_copy(insn)
                    if copy is not None and copy[1] not in out:
                        uses = {}
                    whole = (insn.replaced_registers | insn.low_writes | (insn.written_registers & _VECTOR)) \
                        - insn.conditional_registers
                    callee = trace.own_callee_of.get(key)
                    if callee is not None:
                        merge(uses, {r: 64 for r in needs.get(callee, frozenset())})
                        after = (frozenset(out) if insn.flow == "call" else returned[group]) & _RETURN_REGISTERS
                        if callee in returned and not after <= returned[callee]:
                            returned[callee] = returned[callee] | after
                            changed = True
                    if insn.flow == "call":
                        whole = _clobbered(key, trace)
                    value = {r: w for r, w in out.items() if r not in whole}
                    for register, width in insn.partial_writes:
                        if register in value and value[register] <= width:
                            del value[register]
                    merge(value, uses)
                    if live.get(key) != value:
                        live[key] = value
                        moved = True
            entry = [k for k in keys if trace.steps[k].function_start]
            found = frozenset(r for k in entry for r in live[k]) & _ENTRY_READABLE if entry else frozenset()
            if found != needs[group]:
                needs[group] = found
                changed = True
    return needs, returned


def _wide_needs(trace: FrameTrace, needs: dict[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    """Of each function's needs, the vector registers it (or a callee) reads whole, as ymm or zmm: their
    upper part is what a caller must have set too (round 211: a count kept in bits 128-255 of %ymm0, past
    a legacy-SSE write that sets only the low half). Over-approximate: any wide read in the function."""
    wide: dict[str, frozenset[str]] = {}
    for key in trace.order:
        step = trace.steps[key]
        wide[step.group] = wide.get(step.group, frozenset()) | step.insn.wide_reads
    changed = True
    while changed:
        changed = False
        for key, callee in trace.own_callee_of.items():
            group = trace.steps[key].group
            more = wide.get(group, frozenset()) | wide.get(callee, frozenset())
            if more != wide.get(group, frozenset()):
                wide[group], changed = more, True
    return {group: needs.get(group, frozenset()) & regs for group, regs in wide.items()}


def _states(trace: FrameTrace, successors: dict[Key, list[Key]], needs: dict[str, frozenset[str]]
            ) -> dict[Key, _State]:
    """The state on entry to every instruction: what all paths to it agree on."""
    def entry_state(group: str) -> _State:
        given = trace.harness_arguments.get(group, -1)
        if given == -1:  # another function of the part: its callers set what it reads (checked at each call)
            defined = needs[group]
        elif given is None:  # the harness calls it by a signature the scan cannot read: any argument register
            defined = _ENTRY_READABLE
        else:
            defined = frozenset(_INTEGER_ARGUMENTS[:given[0]]) | frozenset(_VECTOR_ARGUMENTS[:given[1]])
        return _State(undefined=_TRACKED - defined)

    entries = {key for key, step in trace.steps.items() if step.function_start}
    into: dict[Key, _State] = {key: entry_state(trace.steps[key].group) for key in entries}
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
            start = entry_state(group) if start is None else start
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
            into[key] = entry_state(trace.steps[key].group)


def unwritten_reads(trace: FrameTrace) -> list[UnwrittenRead]:
    """Reads of frame bytes that some path from the function's entry reaches unwritten, and uses of
    registers no path of this call is sure to have set."""
    index = {key: i for i, key in enumerate(trace.order)}
    successors = {key: _successors(key, index, trace) for key in trace.order}
    trace.clobbers = _writes(trace)
    needs, returned = _needs(trace, successors)
    trace.wide_needs = _wide_needs(trace, needs)
    states = _states(trace, successors, needs)
    found: list[UnwrittenRead] = []
    for group, given in trace.harness_arguments.items():
        passed = set() if given is None else set(_INTEGER_ARGUMENTS[:given[0]]) | set(_VECTOR_ARGUMENTS[:given[1]])
        extra = (needs.get(group, frozenset()) - passed) | trace.wide_needs.get(group, frozenset())
        if given is not None and group in needs and extra:
            found.append(UnwrittenRead(function=group, instruction="(its entry)", offset=0, size=8,
                                       how=f"reads %{', %'.join(sorted(extra))} on entry, which the harness does not "
                                           "pass it"))
    for key in trace.order:
        state, step = states[key], trace.steps[key]
        insn = step.insn
        reads: list[tuple[int, int, str]] = []
        if not _is_probe(insn) and insn.mnemonic not in ("ret", "pop") and not _is_move(step):
            reads += [(offset, size, "reads") for offset, size in _stack_accesses(step, insn.reads)]
        reads += [(offset, size, "loads a pointer from") for offset, size in trace.required_reads.get(key, ())]
        if insn.flow == "call":
            reads += [(offset, size, "passes a call") for offset, size in trace.call_reads.get(key, ())]
            needed = trace.own_stack_arguments.get(key, 0)
            if needed:
                reads.append((-step.frame, needed, "passes its own callee as stack-passed arguments"))
        for offset, size, how in reads:
            if not _covers(state.written, offset, offset + size) or _overlaps(state.foreign, offset, offset + size):
                found.append(UnwrittenRead(function=step.group, instruction=insn.text, offset=offset, size=size,
                                           how=how))
        quiet = _is_move(step) or _is_probe(insn) or insn.mnemonic in ("ud0", "ud1", "ud2", "vzeroupper")
        reads_now = _register_reads(insn) - {"rsp"}
        used = frozenset() if quiet else _undefined_reads(insn, state, trace.narrowed.get(key)) | \
            (reads_now & insn.wide_reads & state.upper)
        callee = trace.own_callee_of.get(key)
        if callee is not None:
            used |= needs.get(callee, frozenset()) & state.undefined
            used |= trace.wide_needs.get(callee, frozenset()) & state.upper
        if insn.flow == "return":
            used |= state.stale & _CALLEE_SAVED  # the caller's own registers, restored from nothing it saved
            used |= returned.get(step.group, frozenset()) & state.undefined  # a result a caller reads
        for register in sorted(used):
            found.append(UnwrittenRead(function=step.group, instruction=insn.text, offset=0, size=8,
                                       how=f"uses %{register}, which no path of this call is sure to have set"))
    return found
