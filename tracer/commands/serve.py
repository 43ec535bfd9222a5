"""`tracer serve`: the runs under some folders, their timelines and a job queue, in a browser."""
from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="browse runs, timelines and jobs in a browser (docs/serve.md)")
    p.add_argument("--runs", action="append", type=Path, help="a folder of runs (repeatable; default ./runs)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any other needs --token)")
    p.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765)")
    p.add_argument("--token", help="every request must carry it (Authorization: Bearer TOKEN, or /?token=TOKEN once)")
    p.add_argument("--token-file", type=Path, help="read the token from this file")
    p.add_argument("--read-only", action="store_true", help="no job submission, cancel or import")
    p.add_argument("--jobs", type=Path, help="the job allow-list (YAML; default: the built-in workloads and campaigns)")
    p.add_argument("--gpus", help="GPU indices of the job queue, e.g. 0,1 "
                   "(default: those CUDA_VISIBLE_DEVICES names, else every GPU the driver sees; 'none')")
    p.add_argument("--state", type=Path, help="index, job state and caches (default RUNS/.tracer-serve)")
    p.add_argument("--upload-limit-mb", type=int, default=256, help="largest trace upload (default 256)")
    p.add_argument("--rescan-s", type=float, default=10.0, help="seconds between index rescans (default 10)")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from tracer.serve.launch import serve, settings

    s = settings(runs=args.runs, host=args.host, port=args.port, token=args.token, token_file=args.token_file,
                 read_only=args.read_only, jobs=args.jobs, gpus=args.gpus, state=args.state,
                 upload_limit_mb=args.upload_limit_mb, rescan_s=args.rescan_s)
    serve(s, args.host, args.port)
    return 0
