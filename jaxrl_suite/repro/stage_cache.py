"""The stage cache of the reproduction scripts: `jaxrl_suite.core.stage_cache`, re-exported under
the reproduction layer's name (the cache lives in core/ so that the library's studies in lm/ and
train/, which may not import repro/, key their stages the same way)."""

from jaxrl_suite.core.stage_cache import (FORMAT, Stage, StageCacheError, StageResult,
                                          cached_stage, canonical_json, library_fingerprint,
                                          process_fingerprint, run_stage, run_stages, stage_key,
                                          stage_paths)

__all__ = ["FORMAT", "Stage", "StageCacheError", "StageResult", "cached_stage", "canonical_json",
           "library_fingerprint", "process_fingerprint", "run_stage", "run_stages", "stage_key",
           "stage_paths"]
