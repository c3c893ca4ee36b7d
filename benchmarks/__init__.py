"""The performance suite: each module times forward+backward passes and reports ratios measured in one run."""
