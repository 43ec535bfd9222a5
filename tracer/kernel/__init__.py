"""The cast-transpose kernel family: spec (variants, configs, heuristic), NVRTC compile, cuda.core launch, SASS."""
