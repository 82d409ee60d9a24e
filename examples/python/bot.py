#!/usr/bin/env python3
"""A bot in Python on the platform's gRPC API, with stubs generated from proto/ (grpcio).

It does what `draughts bot` does, without an engine: holds Games.WatchPlayerEvents open, accepts every
invitation addressed to it, and plays each game (in its own thread) with the first legal move the
server's Rules.ListMoves gives, waiting for the opponent on Games.WatchGame. A real bot puts its engine
where `choose` is.

Stubs (once): python -m grpc_tools.protoc -I proto --python_out=GEN --grpc_python_out=GEN \
    proto/draughts/v1/*.proto
Run:          python examples/python/bot.py --stubs GEN --server 127.0.0.1:50051 --token dk_...
The token is an API key with the `bot` and `play` scopes (Auth.CreateApiKey, by an administrator).
"""

import argparse
import sys
import threading


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", default="127.0.0.1:50051", help="HOST:PORT (plain HTTP/2)")
    p.add_argument("--token", required=True, help="an API key with the bot scope")
    p.add_argument("--stubs", required=True, help="where grpc_tools.protoc wrote the stubs")
    p.add_argument("--games", type=int, default=0, help="exit after this many games (0: never)")
    return p.parse_args()


args = parse_args()
sys.path.insert(0, args.stubs)

import grpc  # noqa: E402
from draughts.v1 import auth_pb2, auth_pb2_grpc, common_pb2, games_pb2, games_pb2_grpc  # noqa: E402
from draughts.v1 import rules_pb2, rules_pb2_grpc  # noqa: E402

METADATA = [("authorization", f"Bearer {args.token}")]
channel = grpc.insecure_channel(args.server)
auth = auth_pb2_grpc.AuthStub(channel)
games = games_pb2_grpc.GamesStub(channel)
rules = rules_pb2_grpc.RulesStub(channel)

me = auth.WhoAmI(auth_pb2.WhoAmIRequest(), metadata=METADATA).player
print(f"signed in as {me.id} (bot: {me.bot})", flush=True)

finished = threading.Semaphore(0)
playing = set()
lock = threading.Lock()


def over(status):
    return status.outcome != common_pb2.OUTCOME_ONGOING


def choose(view):
    """The move to play in `view` (here: the server's first legal move; put an engine here)."""
    legal = rules.ListMoves(
        rules_pb2.ListMovesRequest(rules=view.rules, fen=view.position.fen), metadata=METADATA
    )
    return legal.moves[0]


def my_turn(view):
    mine = common_pb2.COLOR_WHITE if view.white.id == me.id else common_pb2.COLOR_BLACK
    return view.status.outcome == common_pb2.OUTCOME_ONGOING and view.position.side_to_move == mine


def play(game_id):
    """Plays one game to its end."""
    while True:
        view = games.GetGame(games_pb2.GetGameRequest(game_id=game_id), metadata=METADATA)
        if over(view.status):
            break
        if my_turn(view):
            move = choose(view)
            try:
                games.PlayMove(
                    games_pb2.PlayMoveRequest(
                        game_id=game_id,
                        move=common_pb2.MoveInput(squares=common_pb2.MoveSquares(squares=move.path)),
                        expected_ply=len(view.moves),
                    ),
                    metadata=METADATA,
                )
            except grpc.RpcError as e:
                # Stale view (the game moved on) or over: read it again.
                print(f"game {game_id}: {e.code().name} {e.details()}", flush=True)
            continue
        # The opponent's turn: wait for the next move (or the end) on the game's event stream.
        plies = len(view.moves)
        for event in games.WatchGame(games_pb2.WatchGameRequest(game_id=game_id), metadata=METADATA):
            kind = event.WhichOneof("kind")
            if kind == "finished" or (kind == "move_played" and event.move_played.ply > plies):
                break
    print(f"game {game_id}: {view.status.description}", flush=True)
    finished.release()


def start(game_id):
    with lock:
        if game_id in playing:
            return
        playing.add(game_id)
    threading.Thread(target=play, args=(game_id,), daemon=True).start()


def events():
    """Accepts invitations to the bot and starts a thread per game."""
    for event in games.WatchPlayerEvents(games_pb2.WatchPlayerEventsRequest(), metadata=METADATA):
        kind = event.WhichOneof("kind")
        if kind == "invitation":
            inv = event.invitation
            if inv.invitee.id == me.id and inv.state == games_pb2.INVITATION_STATE_PENDING:
                view = games.AcceptInvitation(
                    games_pb2.InvitationRequest(invitation_id=inv.invitation_id), metadata=METADATA
                )
                print(f"accepted {inv.invitation_id} from {inv.inviter.id}", flush=True)
                start(view.game_id)
        elif kind == "game_started":
            start(event.game_started.game_id)


threading.Thread(target=events, daemon=True).start()
done = 0
while args.games == 0 or done < args.games:
    finished.acquire()
    done += 1
print(f"{done} games played", flush=True)
