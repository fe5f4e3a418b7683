"""kernelloop from Python: what `kernelloop verify`, `profile` and `optimize` do, one call each
(`search` is the corpus's own function, kernelloop.corpus.engine.search). `import kernelloop`
loads none of this: the package's `__getattr__` imports each name on first use.

`settings=None` reads the settings as the CLI does (./kernelloop.toml, then the KERNELLOOP_*
variables); a Settings you pass is used as given. Problems a user can fix raise
kernelloop.errors.KernelloopError subclasses (InputError, ConfigError, EnvironmentProblem) with
one line saying what to do; nothing is printed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .config import Settings, load_settings

if TYPE_CHECKING:
    from .agents.events import LoopEvent
    from .profiler.run import ProfileResult
    from .verify.verdict import Progress
    from .verify.verdict import Verdict


def verify_files(baseline: str | Path, candidate: str | Path, settings: Settings | None = None, *,
                 progress: Callable[[Progress], None] | None = None) -> Verdict:
    """The verify gate: is CANDIDATE (a whole program or its editable part) correct against
    BASELINE and faster by the threshold? `verdict.accepted`, `verdict.summary`, the gates and
    the evidence. Needs nvcc and a GPU (`kernelloop doctor` says what is missing)."""
    from .verify.gate import verify_files as verify

    return verify(Path(baseline), Path(candidate), settings or load_settings(), progress=progress)


def profile_file(path: str | Path, settings: Settings | None = None, *, kernel: str | None = None,
                 section_set: Literal["full", "fast"] = "full", clock_control: Literal["none", "base"] = "none",
                 output_dir: str | Path | None = None) -> ProfileResult:
    """Nsight Compute on one launch of the program's hottest kernel (or the one `kernel`, a regex,
    names) and its diagnosis (`result.diagnosis`). Needs nvcc, ncu and a GPU."""
    from .profiler.run import profile_file as profile

    return profile(Path(path), settings or load_settings(), kernel=kernel, section_set=section_set,
                   clock_control=clock_control, output_dir=Path(output_dir) if output_dir is not None else None)


async def optimize(kernel: str | Path | None = None, settings: Settings | None = None, *, resume: str | None = None,
                   optimizer: str | None = None, model: str | None = None, base_url: str | None = None,
                   api_key: str | None = None) -> AsyncIterator[LoopEvent]:
    """`kernelloop optimize` as an async generator of its events (kernelloop.agents.events.LoopEvent):
    the first says where the run folder is (`data["run_dir"]`), the last (kind "done") how the run
    ended (`data["status"]`: accepted or exhausted); `summary.json` in the run folder has the rest.
    Give a kernel, or `resume` a run by its id. `optimizer`: auto, offline, nim or openai; `model`,
    `base_url` and `api_key` as the CLI's options (the key: else $NVIDIA_API_KEY, then ./.env)."""
    from .graph.optimize import optimize as events
    from .llm_config import resolve_llm_config

    stream = events(Path(kernel) if kernel is not None else None, settings or load_settings(),
                    resolve_llm_config(model, base_url, api_key), optimizer_kind=optimizer, resume=resume)
    async with aclosing(stream):  # stopping early closes the loop now (the run is then resumable)
        async for event in stream:
            yield event
