"""Python TorchScript contender for bench/compare.js: a persistent child that loads the same file,
then runs one timed call per request so the Node side can interleave it with its own contenders.

    python bench/torchscript_child.py MODEL GOLDEN_DIR THREADS

Requests on stdin, one per line; one reply line each on stdout:
    run B    -> milliseconds of one forward at batch B (perf_counter around the call only)
    check B  -> JSON {"maxAbsDiff", "top1Agree"} of one forward against golden/resnet18_output_bB.f32
    quit
The input is golden/resnet18_input_b8.f32 (its first B images), as on the Node side.
"""
import json
import os
import sys
import time

import numpy as np
import torch


def main() -> None:
    model_path, golden, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(threads)
    data = np.fromfile(os.path.join(golden, "resnet18_input_b8.f32"), dtype="<f4").reshape(8, 3, 224, 224)
    inputs = {b: torch.from_numpy(data[:b].copy()) for b in (1, 8)}
    t0 = time.perf_counter()
    model = torch.jit.load(model_path).eval()
    load_ms = (time.perf_counter() - t0) * 1e3
    print(json.dumps({"ready": True, "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "loadMs": load_ms}), flush=True)
    with torch.inference_mode():
        for line in sys.stdin:
            cmd, *rest = line.split()
            if cmd == "quit":
                break
            x = inputs[int(rest[0])]
            if cmd == "run":
                t0 = time.perf_counter()
                model(x)
                print((time.perf_counter() - t0) * 1e3, flush=True)
            elif cmd == "check":
                y = model(x)
                ref = np.fromfile(os.path.join(golden, "resnet18_output_b%d.f32" % x.shape[0]), dtype="<f4")
                ref = torch.from_numpy(ref.reshape(y.shape))
                print(json.dumps({"maxAbsDiff": float((y - ref).abs().max()),
                                  "top1Agree": int((y.argmax(1) == ref.argmax(1)).sum())}), flush=True)


if __name__ == "__main__":
    main()
