#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The Jupyter kernel baseline of tests/bench (kernel_bench.mjs drives it).

Starts an IPython kernel in a container of mcp-sandboxd/bench-jupyter (the
Python runner image plus Debian's python3-ipykernel) with the limits of a
warm box: 256 MB memory and swap, 0.5 CPU, no network, read-only root with
a 64 MB /tmp tmpfs, uid 64321, all capabilities dropped, no-new-privileges,
128 processes, an init. The host talks to it with Debian's
python3-jupyter-client (BlockingKernelClient.execute_interactive) over
ZeroMQ ipc sockets in a bind-mounted directory: the connection file says
"transport": "ipc", so no TCP and no dockerd is on the path of a call.

Commands, one JSON object a line on stdin; one JSON line back on stdout:
  {"op": "exec", "code": "..."}   -> {"ms", "ok", "stdout", "text_plain"}
  {"op": "info"}                  -> {"ms", "ok"} (a kernel_info round trip)
  {"op": "id"}                    -> {"id"} (the container, for its memory)
  {"op": "stop"}                  -> removes the container and exits
ms is the library call's own wall time (perf_counter around it), which is
what a program embedding jupyter_client sees. Run with Debian's
/usr/bin/python3 (jupyter_client 7.4 from python3-jupyter-client).
"""
import argparse
import json
import os
import secrets
import subprocess
import sys
import time

from jupyter_client import BlockingKernelClient

IMAGE = "mcp-sandboxd/bench-jupyter:latest"


def write_conn(path, ip, key):
    # ipc sockets are named "<ip>-<port>": the ports are only suffixes.
    info = {
        "transport": "ipc",
        "ip": ip,
        "shell_port": 1,
        "iopub_port": 2,
        "stdin_port": 3,
        "control_port": 4,
        "hb_port": 5,
        "key": key,
        "signature_scheme": "hmac-sha256",
        "kernel_name": "python3",
    }
    with open(path, "w") as f:
        json.dump(info, f)


def start(conn_dir, label):
    os.makedirs(conn_dir, exist_ok=True)
    os.chown(conn_dir, 64321, 64321)
    os.chmod(conn_dir, 0o700)
    key = secrets.token_hex(16)
    # The kernel reads its file at /conn; the host's copy names the same
    # sockets by their host path.
    write_conn(os.path.join(conn_dir, "kernel.json"), "/conn/k", key)
    write_conn(os.path.join(conn_dir, "host.json"), os.path.join(conn_dir, "k"), key)
    os.chown(os.path.join(conn_dir, "kernel.json"), 64321, 64321)
    cmd = [
        "docker", "run", "-d", "--rm",
        "--label", label, "--label", "mcpsd.bench.kind=jupyter",
        "--user", "64321:64321",
        "--memory", "256m", "--memory-swap", "256m", "--cpus", "0.5",
        "--pids-limit", "128", "--network", "none", "--read-only",
        "--tmpfs", "/tmp:rw,nosuid,nodev,size=64m",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges:true",
        "--init", "--ipc", "private", "--log-driver", "none",
        "-e", "HOME=/tmp", "-e", "JUPYTER_RUNTIME_DIR=/tmp",
        "-e", "IPYTHONDIR=/tmp/.ipython",
        "--mount", f"type=bind,src={conn_dir},dst=/conn",
        IMAGE,
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit(f"docker run of the kernel failed: {r.stderr.strip()}")
    cid = r.stdout.strip()
    kc = BlockingKernelClient()
    kc.load_connection_file(os.path.join(conn_dir, "host.json"))
    deadline = time.monotonic() + 60
    while not all(os.path.exists(os.path.join(conn_dir, f"k-{p}")) for p in (1, 2, 3, 4, 5)):
        if time.monotonic() > deadline:
            logs = subprocess.run(["docker", "logs", cid], capture_output=True, text=True).stderr
            raise SystemExit(f"the kernel did not open its sockets within 60 s: {logs[-500:]}")
        time.sleep(0.05)
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return cid, kc


def run(kc, code):
    out = []
    plain = []

    def hook(msg):
        t = msg["msg_type"]
        c = msg["content"]
        if t == "stream" and c.get("name") == "stdout":
            out.append(c["text"])
        elif t == "execute_result":
            plain.append(c["data"].get("text/plain", ""))

    t0 = time.perf_counter()
    reply = kc.execute_interactive(code, timeout=120, output_hook=hook)
    ms = (time.perf_counter() - t0) * 1000
    ok = reply["content"]["status"] == "ok"
    return {"ms": ms, "ok": ok, "stdout": "".join(out), "text_plain": "".join(plain)}


def info(kc):
    t0 = time.perf_counter()
    kc.kernel_info()
    msg = kc.get_shell_msg(timeout=30)
    ms = (time.perf_counter() - t0) * 1000
    return {"ms": ms, "ok": msg["msg_type"] == "kernel_info_reply"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, help="host directory for the sockets")
    ap.add_argument("--label", default="mcpsd.bench=jupyter")
    a = ap.parse_args()
    cid, kc = start(a.dir, a.label)
    print(json.dumps({"ready": True, "id": cid}), flush=True)
    try:
        for line in sys.stdin:
            req = json.loads(line)
            op = req.get("op")
            if op == "exec":
                res = run(kc, req["code"])
            elif op == "info":
                res = info(kc)
            elif op == "id":
                res = {"id": cid}
            elif op == "stop":
                break
            else:
                res = {"error": f"unknown op {op!r}: exec, info, id or stop"}
            print(json.dumps(res), flush=True)
    finally:
        kc.stop_channels()
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True, timeout=60)


if __name__ == "__main__":
    main()
