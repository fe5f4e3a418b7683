"""Where kernelloop's jobs run: locally (the default) or on a Ray cluster (docs/engine.md).

Importing this package never imports Ray; `make_engine` does, only for the Ray engine."""

from .base import (ENGINES, Engine, EngineCounts, EngineEvent, EngineRun, EngineSettings, GpuTally, Job, JobContext,
                   JobOutcome, LocalEngine, Placement, gpu_model_resource, jobs_sharing_a_gpu, make_engine)

__all__ = ["ENGINES", "Engine", "EngineCounts", "EngineEvent", "EngineRun", "EngineSettings", "GpuTally", "Job",
           "JobContext", "JobOutcome", "LocalEngine", "Placement", "gpu_model_resource", "jobs_sharing_a_gpu",
           "make_engine"]
