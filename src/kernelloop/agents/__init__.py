"""The loop's agents, each a LangGraph node: `async def node(state, runtime) -> update`, a
module-level function that reads the run's LoopContext (tools, optimizer, run folder, run log)
as `runtime.context` and returns a JSON-only state update (graph/loop.py wires them).

    profiler.py    profiler: Nsight Compute on the baseline, the diagnosis
    researcher.py  researcher: passages on the diagnosed bottleneck
    optimizer.py   optimizer: one candidate (or a compile fix of it)
    verifier.py    check (policy, nvcc), verifier (the verify gate), accept (certificate, re-profile)
    finish.py      finish: reports, summary, the run log
    state.py, context.py, events.py   the state and its typed routes, the context, the events
    feedback.py    anti-context: a rejected attempt turned into what the optimizer reads next

Importing this package loads nothing else (the CLI reads `events` without LangGraph)."""
