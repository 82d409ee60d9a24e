#!/usr/bin/env python3
"""A server-to-server analysis client: another service asks the platform for the best move of a
position, with an API key of the `analysis` scope (Auth.CreateApiKey, by an administrator), and prints
one JSON object per answer.

Stubs (once): python -m grpc_tools.protoc -I proto --python_out=GEN --grpc_python_out=GEN \
    proto/draughts/v1/*.proto
Run:          DRAUGHTS_API_KEY=dk_... python examples/server-to-server/analyse.py --stubs GEN \
                  --server 127.0.0.1:50051 --variant english --depth 6 [FEN ...]
Each FEN (none: the start position) gets Analysis.BestMove with the depth as its limit. Rate limits:
every answer carries x-ratelimit-remaining / x-ratelimit-reset; a refusal (RESOURCE_EXHAUSTED) is
retried after its retry-after seconds.
"""

import argparse
import json
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", default="127.0.0.1:50051", help="HOST:PORT (plain HTTP/2)")
    p.add_argument("--stubs", required=True, help="where grpc_tools.protoc wrote the stubs")
    p.add_argument("--variant", default="international", help="VARIANT_<NAME> without the prefix")
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("fens", nargs="*", default=[""])
    return p.parse_args()


args = parse_args()
sys.path.insert(0, args.stubs)

import grpc  # noqa: E402
from draughts.v1 import analysis_pb2, analysis_pb2_grpc, common_pb2  # noqa: E402

key = os.environ.get("DRAUGHTS_API_KEY")
if not key:
    sys.exit("set DRAUGHTS_API_KEY to an API key with the analysis scope")
metadata = [("authorization", f"Bearer {key}")]
analysis = analysis_pb2_grpc.AnalysisStub(grpc.insecure_channel(args.server))
variant = common_pb2.Variant.Value("VARIANT_" + args.variant.upper())

for fen in args.fens:
    request = analysis_pb2.BestMoveRequest(
        position=analysis_pb2.PositionInput(rules=common_pb2.RuleSet(variant=variant), fen=fen),
        limits=analysis_pb2.SearchLimits(depth=args.depth),
    )
    for attempt in range(5):
        try:
            answer, call = analysis.BestMove.with_call(request, metadata=metadata, timeout=60)
            break
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or attempt == 4:
                sys.exit(f"BestMove: {e.code().name}: {e.details()}")
            wait = dict(e.trailing_metadata() or ()).get("retry-after", "1")
            time.sleep(int(wait))
    limits = {k: v for k, v in call.initial_metadata() if k.startswith("x-ratelimit-")}
    score = answer.score.WhichOneof("kind")
    print(json.dumps({
        "fen": fen,
        "move": answer.move.notation,
        "path": list(answer.move.path),
        "score": {score: getattr(answer.score, score)} if score else None,
        "depth": answer.depth,
        "ratelimit": limits,
    }), flush=True)
