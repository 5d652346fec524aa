"""coevo-code: co-evolving coders and unit testers with reinforcement learning."""

__version__ = "0.1.0"
