"""Test-only shim (tests/test_recipes.py puts this folder first on PYTHONPATH): TRL's colocated
vLLM engine gets the policy's dtype, float32 on CPU.

TRL 1.16 builds ``LLM(...)`` without a dtype, and vLLM's ``auto`` dtype downcasts a float32
checkpoint to bfloat16 on CPU (``vllm/config/model.py::_resolve_auto_dtype``: the CPU platform's
first supported dtype is bfloat16). The weight-sync check then compares a bf16 engine with an
fp32 policy under its fp32 thresholds: that passes on the task world's short prompts (mean
|delta log p| about 5.5e-4) and stops the run at the first sync on MBPP's prompts (4.5e-3 > 2e-3).
Until ``CoevoTrainer`` passes the policy's dtype to TRL's engine, this shim does, when
``trl.generation.vllm_generation`` is imported: ``dtype="float32"`` unless a dtype is given."""

import importlib.abc
import importlib.machinery
import sys

TARGET = "trl.generation.vllm_generation"


class _AfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            llm = getattr(module, "LLM", None)
            if llm is None:  # no vLLM: nothing to patch
                return

            def LLM(*args, **kwargs):  # stands in for vllm.LLM
                kwargs.setdefault("dtype", "float32")
                return llm(*args, **kwargs)

            module.LLM = LLM

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _AfterImport())
