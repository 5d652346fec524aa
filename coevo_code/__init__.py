"""coevo-code: co-evolving coders and unit testers with reinforcement learning."""

__version__ = "0.1.0"


def __getattr__(name):  # heavy parts load on first use
    if name == "TesterReward":
        from .training.tester_reward import TesterReward
        return TesterReward
    if name == "Executor":
        from .execution import Executor
        return Executor
    raise AttributeError(name)
