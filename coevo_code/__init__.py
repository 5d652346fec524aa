"""coevo-code: co-evolving coders and unit testers with reinforcement learning."""

from .version import __version__  # noqa: F401 - the package version, public here


def __getattr__(name):  # heavy parts load on first use
    if name == "TesterReward":
        from .training.tester_reward import TesterReward
        return TesterReward
    if name == "Executor":
        from .execution import Executor
        return Executor
    raise AttributeError(name)
