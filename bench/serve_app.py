"""The Python service of `npm run bench:serve`: FastAPI on uvicorn serving the same TorchScript
file as the Node services (bench/serve-server.js), with the same routes and thread count.

    python bench/serve_app.py MODEL THREADS

Binds 127.0.0.1 on a free port and prints {"port": N, ...} on stdout. Routes:
    POST /v1/tensor   application/octet-stream, one float32 [1, 3, 224, 224] (602112 bytes)
    POST /v1/image    image bytes: PIL decode, torchvision Resize(256), CenterCrop(224), ToTensor,
                      Normalize(ImageNet) -- torch.image.load's options on the Node side
    both answer {"index": top-1 class, "logit": its logit}
    GET  /_bench/stats[?reset=1]  event-loop lag since the last reset: a task that sleeps 10 ms
                      and records how late it wakes (what monitorEventLoopDelay measures in Node);
                      `busy`: requests whose work has not finished (the bench waits for 0)

The model runs as a careful FastAPI service runs it: the handlers are `async def`, and decoding
and forwards go to ONE worker thread (a ThreadPoolExecutor of 1) under torch.inference_mode, so
the event loop stays free and forwards never overlap: the same as torch-node's one executor
instance with torch.set_num_threads(THREADS) intra-op threads. (A plain `def` handler would run
forwards on Starlette's 40-thread pool at once: 40 OpenMP teams on a few cores.)
"""
import asyncio
import json
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from io import BytesIO

import torch

SHAPE = (1, 3, 224, 224)
TENSOR_BYTES = 3 * 224 * 224 * 4
LAG_RESOLUTION_S = 0.010


def main() -> None:
    model_path, threads = sys.argv[1], int(sys.argv[2])
    import fastapi
    import uvicorn
    from fastapi import FastAPI, HTTPException, Request
    from PIL import Image
    from torchvision import transforms

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    model = torch.jit.load(model_path).eval()
    load_ms = (time.perf_counter() - t0) * 1e3
    preprocess = transforms.Compose([
        transforms.Resize(256),
        transforms.CenterCrop(224),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inference")

    def top1(x: torch.Tensor) -> dict:
        with torch.inference_mode():
            y = model(x)
        index = int(y[0].argmax())
        return {"index": index, "logit": float(y[0, index])}

    def from_bytes(body: bytes) -> dict:
        x = torch.frombuffer(bytearray(body), dtype=torch.float32).reshape(SHAPE)
        return top1(x)

    def from_image(body: bytes) -> dict:
        image = Image.open(BytesIO(body)).convert("RGB")
        return top1(preprocess(image).unsqueeze(0))

    # Warm-up as the Node services do: TorchScript's first calls per shape are slow.
    for _ in range(2):
        worker.submit(top1, torch.zeros(SHAPE)).result()

    lag = {"samples": []}
    work = {"busy": 0}

    async def run(fn, body: bytes) -> dict:
        work["busy"] += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(worker, fn, body)
        finally:
            work["busy"] -= 1

    async def watch_lag() -> None:
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(LAG_RESOLUTION_S)
            lag["samples"].append(max(0.0, loop.time() - t - LAG_RESOLUTION_S))
            if len(lag["samples"]) > 1_000_000:
                del lag["samples"][: len(lag["samples"]) // 2]

    @asynccontextmanager
    async def lifespan(app):
        watch = asyncio.create_task(watch_lag())
        yield
        watch.cancel()

    app = FastAPI(lifespan=lifespan)

    @app.post("/v1/tensor")
    async def tensor(request: Request) -> dict:
        body = await request.body()
        if len(body) != TENSOR_BYTES:
            raise HTTPException(400, f"expected {TENSOR_BYTES} bytes (float32 {list(SHAPE)}), got {len(body)}")
        return await run(from_bytes, body)

    @app.post("/v1/image")
    async def image(request: Request) -> dict:
        body = await request.body()
        if not body:
            raise HTTPException(400, "send an image body")
        return await run(from_image, body)

    @app.get("/_bench/stats")
    async def stats(reset: str = "") -> dict:
        samples = sorted(lag["samples"])
        pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))] * 1e3  # noqa: E731
        out = {"busy": work["busy"], "eventLoopLag": {"p50": pick(0.5), "p99": pick(0.99), "max": samples[-1] * 1e3,
                                "samples": len(samples)} if samples else None}
        if reset:
            lag["samples"] = []
        return out

    # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
    # accepted sockets inherit this one's (proto 0 left Nagle on: 40 ms per answer at 1 connection).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    # What uvicorn picked for loop="auto" / http="auto" (uvloop and httptools when installed).
    try:
        import uvloop  # noqa: F401
        loop_impl = "uvloop"
    except ImportError:
        loop_impl = "asyncio"
    try:
        import httptools  # noqa: F401
        http_impl = "httptools"
    except ImportError:
        http_impl = "h11"
    print(json.dumps({"port": sock.getsockname()[1], "loadMs": load_ms, "threads": torch.get_num_threads(),
                      "torch": torch.__version__, "fastapi": fastapi.__version__, "uvicorn": uvicorn.__version__,
                      "python": sys.version.split()[0], "loop": loop_impl, "http": http_impl}), flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # the bench prints this as the row's reason
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        sys.exit(1)
