"""The Python side of bench/cuda.js (the GPU benchmarks), run in its own process.

    python bench/cuda_peer.py prepare WORK [--no-compile]     the models bench/cuda.js loads
    python bench/cuda_peer.py resnet WORK --batch N --iters N [--compiled]
    python bench/cuda_peer.py lm WORK --streams N --tokens N

`prepare` writes, with random weights (the figures are speed, not accuracy):
    WORK/resnet50-fp16.pt     torchvision's ResNet-50, float16, channels-last, torch.jit.trace'd
    WORK/resnet50-fp16.pt2    the same through torch.export + AOTInductor for CUDA, batch 1..64
`resnet` measures Python eager (or torch.compile with --compiled) on the same weights: batch 1
latency (median ms) and images/s, each call followed by copying the output to the host (as
bench/cuda.js does). `lm` measures transformers' generate, greedy, bf16, on a random model of
SmolLM2-135M's shape: tokens/s for N streams in one batch. Each prints one JSON line.
"""
import argparse
import json
import os
import statistics
import time


def resnet50(torch):
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval()
    return model.to("cuda", torch.float16).to(memory_format=torch.channels_last)


def example(torch, batch):
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.float16)
    return x.contiguous(memory_format=torch.channels_last)


def prepare(args):
    import torch

    os.makedirs(args.work, exist_ok=True)
    model = resnet50(torch)
    started = time.time()
    with torch.inference_mode():
        torch.jit.trace(model, example(torch, 1)).save(os.path.join(args.work, "resnet50-fp16.pt"))
    out = {"traced_s": round(time.time() - started, 1)}
    if not args.no_compile:
        started = time.time()
        batch = torch.export.Dim("batch", min=1, max=64)
        with torch.no_grad():
            ep = torch.export.export(model, (example(torch, 2),), dynamic_shapes={"x": {0: batch}})
            torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(args.work, "resnet50-fp16.pt2"))
        out["aoti_s"] = round(time.time() - started, 1)
    print(json.dumps(out), flush=True)


def measure(fn, iters):
    """Median latency (ms) of fn() over iters calls after 5 warm-up calls, and calls/s."""
    for _ in range(5):
        fn()
    times = []
    started = time.perf_counter()
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    total = time.perf_counter() - started
    return statistics.median(times), iters / total


def resnet(args):
    import torch

    model = resnet50(torch)
    compile_s = None
    if args.compiled:
        started = time.time()
        model = torch.compile(model)
        with torch.inference_mode():
            model(example(torch, args.batch)).cpu()  # compiles
        compile_s = round(time.time() - started, 1)
    x = example(torch, args.batch)
    with torch.inference_mode():
        ms, per_s = measure(lambda: model(x).cpu(), args.iters)
    print(json.dumps({"batch": args.batch, "median_ms": ms, "images_per_s": per_s * args.batch,
                      "compiled": args.compiled, "compile_s": compile_s}), flush=True)


def lm(args):
    import torch
    import transformers

    # SmolLM2-135M's shape (its config.json), random weights.
    config = transformers.LlamaConfig(
        vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192, rope_theta=100000.0,
        tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, pad_token_id=0,
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).to("cuda", torch.bfloat16).eval()
    ids = torch.randint(3, 49152, (args.streams, 16), device="cuda")
    mask = torch.ones_like(ids)

    def run():
        out = model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=args.tokens,
                             min_new_tokens=args.tokens, pad_token_id=0)
        return out.cpu()

    with torch.inference_mode():
        run()  # warm-up
        started = time.perf_counter()
        run()
        seconds = time.perf_counter() - started
    print(json.dumps({"streams": args.streams, "tokens": args.tokens,
                      "tokens_per_s": args.streams * args.tokens / seconds}), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    q = sub.add_parser("prepare")
    q.add_argument("work")
    q.add_argument("--no-compile", action="store_true")
    q = sub.add_parser("resnet")
    q.add_argument("work")
    q.add_argument("--batch", type=int, required=True)
    q.add_argument("--iters", type=int, default=50)
    q.add_argument("--compiled", action="store_true")
    q = sub.add_parser("lm")
    q.add_argument("work")
    q.add_argument("--streams", type=int, default=1)
    q.add_argument("--tokens", type=int, default=128)
    args = p.parse_args()
    {"prepare": prepare, "resnet": resnet, "lm": lm}[args.command](args)


if __name__ == "__main__":
    main()
