"""PyTorch reference throughput for bench/run-linear.sh: bf16 F.linear, 2 threads
(1 thread timed with the thread's CPU clock with --cpu-time).

Prints "torch,BF16,<M>,<K>,<N>,<seconds per call>,<GFLOP/s>" per shape.
"""
import sys
import time

import torch
import torch.nn.functional as F


def shapes(quick):
    if quick:
        return [(16, 4096, 4096), (256, 4096, 4096), (1024, 4096, 4096), (256, 4096, 12288)]
    kn = [(64, 64), (2048, 2048), (4096, 4096), (4096, 12288), (12288, 4096)]
    return [(m, k, n) for m in (16, 256, 1024, 4096) for (k, n) in kn]


def main():
    quick = "--quick" in sys.argv
    min_seconds = float(sys.argv[sys.argv.index("--min-seconds") + 1]) if "--min-seconds" in sys.argv else 0.5
    cpu_time = "--cpu-time" in sys.argv
    clock = time.thread_time if cpu_time else time.perf_counter
    torch.set_num_threads(1 if cpu_time else 2)
    torch.manual_seed(0)
    for m, k, n in shapes(quick):
        x = torch.randn(m, k).bfloat16()
        w = torch.randn(n, k).bfloat16()
        start = clock()
        F.linear(x, w)  # warm-up
        first = max(clock() - start, 1e-7)
        # Best batch of calls, as the stepmix side reports (least noisy on a
        # shared machine); batches of >= ~2 ms, as short calls are below what
        # the clocks resolve reliably.
        batch = max(1, int(2e-3 / first))
        samples, total, t = 0, 0.0, float("inf")
        while samples < 3 or total < min_seconds:
            start = clock()
            for _ in range(batch):
                F.linear(x, w)
            dt = clock() - start
            t, total, samples = min(t, dt / batch), total + dt, samples + 1
        print(f"torch,BF16,{m},{k},{n},{t:.6g},{2.0 * m * n * k / t * 1e-9:.2f}", flush=True)


if __name__ == "__main__":
    main()
