"""GPU test of the Python package's found kernels (ctest label gpu): a tune
search on the softmax example task, then Kernel.load into PyTorch's CUDA
context and Kernel.launch on a PyTorch stream with PyTorch tensors, for
several shapes (the fixture solution has a plan variant per row width),
checked against torch.softmax. Exits 77 (skipped) without a GPU or PyTorch.

Runs on the source tree's package (bindings/python) with the build's
library ($KSEARCH_LIBRARY, set by ctest), so the GPU machine needs no pip.
"""
import os
import sys
import tempfile
import unittest
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SOURCE / "bindings" / "python"))
import ksearch  # noqa: E402

try:
    import torch
    HAVE_GPU = torch.cuda.is_available()
except ImportError:
    torch = None
    HAVE_GPU = False

SOFTMAX = str(SOURCE / "examples" / "tasks" / "softmax")
VARIANTS = SOURCE / "tests" / "fixtures" / "kernels" / "softmax_variants.json"
SHAPES = [(4096, 1024), (256, 32768), (1024, 8192), (7, 3000), (1, 1)]


class KernelGpuTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.zeros(1, device="cuda")  # PyTorch makes its primary context current on this thread
        cls.stream = torch.cuda.Stream()

    def check_launches(self, kernel):
        for rows, cols in SHAPES:
            x = torch.randn(rows, cols, device="cuda") * 3
            y = torch.full_like(x, float("nan"))
            # x and y are written on the current stream: the kernel's stream waits for them
            # (without it, a fast launch could run before the NaN fill and be overwritten by it).
            self.stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.stream):
                kernel.launch({"R": rows, "C": cols}, {"x": x, "y": y}, stream=self.stream)
            self.stream.synchronize()
            torch.testing.assert_close(y, torch.softmax(x, dim=1), rtol=1e-4, atol=1e-6,
                                       msg=lambda m: f"{rows} x {cols}: {m}")
        with self.assertRaisesRegex(ksearch.KsearchError, "y"):
            small = torch.empty(2, device="cuda")
            kernel.launch({"R": 4, "C": 4}, {"x": torch.empty(4, 4, device="cuda"), "y": small}, stream=self.stream)

    def test_found_kernel_launches_on_torch_buffers(self):
        with tempfile.TemporaryDirectory(prefix="ksearch-gpu-") as work:
            res = ksearch.run_search(SOFTMAX, llm=ksearch.LlmOptions.offline(), budget={"max_rounds": 4},
                                     run_dir=Path(work) / "run")
            self.assertTrue(res.has_best, res.data)
            with ksearch.Kernel.load(result=res) as k:
                self.assertEqual(k.dims, ["R", "C"])
                self.check_launches(k)
            with ksearch.Kernel.load(run_dir=res.run_dir) as k:  # the same kernel from its run folder
                self.assertEqual(k.solution_id, res.best_solution_id)

    def test_solution_with_variants(self):
        with ksearch.Kernel.load(solution_path=VARIANTS, task=SOFTMAX) as k:
            self.assertEqual(k.module_count, 3)
            self.check_launches(k)


if __name__ == "__main__":
    if not HAVE_GPU:
        print("test_package_gpu: skipped (no CUDA GPU or no PyTorch)")
        sys.exit(77)
    unittest.main()
