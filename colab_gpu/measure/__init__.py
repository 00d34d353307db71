"""The measuring layer: timing (the course's timing methods), memory, the profiler read as a few numbers and the
regime rule with its levers, the host record, the course GPUs' reference figures and recorded steps, plots.
It imports the hardware layer only.
"""
