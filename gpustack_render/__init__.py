"""gpustack-render: GPUStack worker NodeFeatures and Kueue chain as declarative rules."""
