"""Load figure of the mirror: `nlp hub serve` under 32 concurrent clients on loopback.

Runs `nlp hub serve` in a subprocess over a temp directory holding one 100 MB file, then 32
clients download it at once (threads; each streams to its own file and hashes it). Reports
throughput, errors (must be 0) and whether every copy's sha256 matches. The peer, in the same
run: Python's `http.server` (ThreadingHTTPServer, the usual ad-hoc file server) with the same
clients, so the ratio says what the mirror costs or gains over it.

    python benchmarks/hub_serve.py            # 100 MB, 32 clients
    python benchmarks/hub_serve.py --quick    # 16 MB, 32 clients
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
from _harness import free_port, wait_ready


def wait_up(url: str, headers: dict, timeout: float = 30) -> None:
    wait_ready(url, headers=headers, timeout=timeout, any_status=True)  # any answer: the server is up


def one_client(url: str, dest: Path, headers: dict) -> tuple[str, int]:
    h = hashlib.sha256()
    n = 0
    with requests.get(url, headers=headers, stream=True, timeout=120) as r:
        r.raise_for_status()
        with open(dest, "wb") as f:
            for chunk in r.iter_content(1 << 20):
                f.write(chunk)
                h.update(chunk)
                n += len(chunk)
    return h.hexdigest(), n


def run_clients(url: str, clients: int, out: Path, expected: str, size: int, headers: dict) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    errors, mismatches = 0, 0
    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        futures = [pool.submit(one_client, url, out / f"copy{i}", headers) for i in range(clients)]
        for fut in futures:
            try:
                digest, n = fut.result()
            except Exception as err:  # noqa: BLE001 - counted, reported, and the run fails
                print(f"  client error: {type(err).__name__}: {err}", file=sys.stderr)
                errors += 1
                continue
            mismatches += int(digest != expected or n != size)
    dt = time.perf_counter() - t0
    shutil.rmtree(out)
    total = clients * size
    return {"seconds": dt, "MB/s": total / dt / 1e6, "errors": errors, "sha_mismatch": mismatches}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="16 MB file instead of 100 MB")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--size-mb", type=int, default=None)
    ap.add_argument("--workers", type=int, default=1, help="`nlp hub serve --workers`")
    args = ap.parse_args()
    size = (args.size_mb or (16 if args.quick else 100)) * 1_000_000

    tmp = Path(tempfile.mkdtemp(prefix="hub-serve-bench-"))
    procs: list[subprocess.Popen] = []
    try:
        repo = tmp / "mirror" / "bench" / "blob"
        repo.mkdir(parents=True)
        data_path = repo / "model.safetensors"
        with open(data_path, "wb") as f:
            f.writelines(os.urandom(1_000_000) for _ in range(size // 1_000_000))
        expected = hashlib.sha256(data_path.read_bytes()).hexdigest()
        token = "bench-token"
        auth = {"Authorization": f"Bearer {token}"}

        port = free_port()
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "nlp", "hub", "serve", str(tmp / "mirror"), "--port", str(port), "--token", token,
             "--workers", str(args.workers)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        ))
        ours_url = f"http://127.0.0.1:{port}/bench/blob/resolve/main/model.safetensors"
        wait_up(ours_url, auth)
        requests.head(ours_url, headers=auth, timeout=120)  # first sha256 pass, cached after (reported apart)

        peer_port = free_port()
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "http.server", str(peer_port), "--bind", "127.0.0.1", "--directory", str(repo)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))
        peer_url = f"http://127.0.0.1:{peer_port}/model.safetensors"
        wait_up(peer_url, {})

        print(f"file {size / 1e6:.0f} MB, {args.clients} concurrent clients, loopback, {os.cpu_count()} CPUs, "
              f"{args.workers} server worker(s)")
        ours = run_clients(ours_url, args.clients, tmp / "out-ours", expected, size, auth)
        peer = run_clients(peer_url, args.clients, tmp / "out-peer", expected, size, {})
        for name, r in (("nlp hub serve", ours), ("http.server (peer)", peer)):
            print(f"  {name:<20} {r['seconds']:7.2f} s  {r['MB/s']:8.1f} MB/s  errors {r['errors']}  sha256 mismatches {r['sha_mismatch']}")
        print(f"  throughput ratio nlp hub serve / http.server: {ours['MB/s'] / peer['MB/s']:.2f}x")
        ok = ours["errors"] == 0 and ours["sha_mismatch"] == 0
        print("OK: 0 errors, every copy's sha256 matches" if ok else "FAILED: errors or mismatched copies")
        return 0 if ok else 1
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
