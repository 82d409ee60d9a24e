// Analysis of a finished game (Analysis.AnalyzeGame, then WatchAnalysis streaming ply by ply): the
// evaluation after each move as a graph from White's side, mistakes marked there and in the move list.
import { Color } from "./gen/draughts/v1/common_pb.js";
import { JobState, Judgement, type PlyAnalysis, type Score, type SideSummary } from "./gen/draughts/v1/analysis_pb.js";
import type { GameView } from "./gen/draughts/v1/games_pb.js";
import { analysis, bearer, Code, ConnectError, currentIdentity, describeError, ensureIdentity, games, retrying, rules as rulesApi } from "./api.js";
import { BoardView } from "./board.js";
import { h } from "./dom.js";
import { t, tDynamic } from "./i18n.js";
import { geometryOf, variantLabel } from "./variants.js";

/** Nodes searched per ply: a few milliseconds each on the server. */
const NODES_PER_PLY = 100_000n;
const CAP = 800;

function centi(s: Score | undefined): number {
  const k = s?.kind;
  if (k?.case === "centiMen") return k.value;
  if (k?.case === "winInPlies") return 10_000;
  if (k?.case === "lossInPlies") return -10_000;
  return 0;
}

const MARK: Record<number, string> = {
  [Judgement.INACCURACY]: "?!",
  [Judgement.MISTAKE]: "?",
  [Judgement.BLUNDER]: "??",
};
const JCLASS: Record<number, string> = {
  [Judgement.GOOD]: "good",
  [Judgement.INACCURACY]: "inaccuracy",
  [Judgement.MISTAKE]: "mistake",
  [Judgement.BLUNDER]: "blunder",
};

export function analysisPage(root: HTMLElement, gameId: string): () => void {
  const abort = new AbortController();
  const title = h("h2", {}, t("analysis.title"));
  const state = h("div", { class: "status", "data-testid": "analysis-state" }, t("analysis.starting"));
  const graph = h("div", { class: "graph", "data-testid": "eval-graph" });
  const summary = h("div", { class: "summary", "data-testid": "analysis-summary" });
  const list = h("ol", { class: "moves analysis-moves", "data-testid": "analysis-moves" });
  const boardBox = h("div", { class: "board-box" });
  root.replaceChildren(
    h("div", { class: "game" }, h("div", { class: "left" }, boardBox), h("div", { class: "right" }, title, h("a", { href: `#/game/${gameId}` }, t("analysis.backToGame")), state, graph, summary, list)),
  );
  const board = new BoardView(boardBox);
  let plies: PlyAnalysis[] = [];
  let game: GameView | null = null;
  let selected = 0;

  function drawGraph() {
    const n = Math.max(plies.length, 1);
    const W = 300;
    const H = 120;
    const x = (i: number) => (i / n) * W;
    const y = (v: number) => H / 2 - (Math.max(-CAP, Math.min(CAP, v)) / CAP) * (H / 2 - 4);
    const pts = [[0, y(0)]];
    plies.forEach((p, i) => {
      const after = centi(p.scoreAfter);
      pts.push([x(i + 1), y(p.side === Color.WHITE ? after : -after)]);
    });
    const svgNS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(svgNS, "svg");
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("class", "eval");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", t("analysis.graph"));
    const mk = (name: string, attrs: Record<string, string | number>) => {
      const e = document.createElementNS(svgNS, name);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
      svg.append(e);
      return e;
    };
    mk("rect", { x: 0, y: 0, width: W, height: H / 2, class: "white-half" });
    mk("line", { x1: 0, y1: H / 2, x2: W, y2: H / 2, class: "axis" });
    mk("polyline", { points: pts.map((p) => p.join(",")).join(" "), class: "curve" });
    plies.forEach((p, i) => {
      if (p.judgement === Judgement.GOOD || p.judgement === Judgement.UNSPECIFIED) return;
      const c = mk("circle", { cx: pts[i + 1][0], cy: pts[i + 1][1], r: 3.5, class: `mark ${JCLASS[p.judgement]}`, "data-ply": p.ply });
      const title = document.createElementNS(svgNS, "title");
      title.textContent = `${p.played?.notation ?? "?"}: ${tDynamic(`analysis.judgement.${JCLASS[p.judgement]}`, JCLASS[p.judgement] ?? "")}`;
      c.append(title);
      c.addEventListener("click", () => void show(p.ply));
    });
    if (selected) mk("line", { x1: x(selected), y1: 0, x2: x(selected), y2: H, class: "cursor" });
    graph.replaceChildren(svg);
  }

  function drawList() {
    list.replaceChildren(
      ...plies.map((p) =>
        h(
          "li",
          { class: JCLASS[p.judgement] ?? "" },
          h(
            "button",
            { class: `mv${selected === p.ply ? " at" : ""}`, "data-ply": p.ply, "data-judgement": JCLASS[p.judgement] ?? "", onclick: () => void show(p.ply) },
            `${p.played?.notation ?? "?"}${MARK[p.judgement] ?? ""}`,
          ),
          p.judgement !== Judgement.GOOD && p.best ? h("span", { class: "best" }, ` ${t("analysis.best", { move: p.best.notation, loss: p.lossCentiMen })}`) : "",
        ),
      ),
    );
  }

  function drawSummary(s: SideSummary[]) {
    summary.replaceChildren(
      ...s.map((x) =>
        h(
          "div",
          {},
          h("b", {}, x.side === Color.WHITE ? t("color.white") : t("color.black")),
          `: ${t("analysis.summary", { inaccuracies: x.inaccuracies, mistakes: x.mistakes, blunders: x.blunders, loss: x.averageLossCentiMen })}`,
        ),
      ),
    );
  }

  async function show(ply: number) {
    if (!game) return;
    selected = ply;
    drawGraph();
    drawList();
    const me = await ensureIdentity();
    const r = await retrying(() =>
      rulesApi.applyMoves(
        { rules: game!.rules, fen: game!.startFen, moves: game!.moves.slice(0, ply).map((m) => ({ move: { case: "squares", value: { squares: m.move?.path ?? [] } } })) },
        bearer(me),
      ),
    );
    board.setPosition(r.position?.pieces ?? [], game.moves[ply - 1]?.move?.path ?? []);
  }

  void (async () => {
    try {
      const me = await ensureIdentity();
      game = await retrying(() => games.getGame({ gameId }, bearer(me)));
      title.textContent = `${t("analysis.title")} · ${variantLabel(game.rules?.variant)}`;
      const { geometry, start } = await geometryOf(game.rules!.variant);
      board.setGeometry(geometry);
      board.setPosition(game.position?.pieces ?? start.position?.pieces ?? []);
      const job = await retrying(() =>
        analysis.analyzeGame({ source: { case: "gameId", value: gameId }, limitsPerPly: { nodes: NODES_PER_PLY } }, bearer(me)),
      );
      state.textContent = job.cached ? t("analysis.cached") : t("analysis.queued");
      for await (const u of analysis.watchAnalysis({ jobId: job.jobId }, { ...bearer(me), signal: abort.signal })) {
        const k = u.kind;
        if (k.case === "queuePosition") state.textContent = t("analysis.ahead", { count: k.value });
        else if (k.case === "progress") {
          plies = [...plies, ...k.value.plies];
          state.textContent = t("analysis.progress", { done: k.value.pliesDone, total: k.value.pliesTotal });
          drawGraph();
          drawList();
        } else if (k.case === "finished") {
          const v = k.value;
          if (v.state === JobState.DONE && v.result.case === "game") {
            plies = v.result.value.plies;
            drawSummary(v.result.value.summary);
            state.textContent = t("analysis.done");
            state.dataset.done = "true";
          } else state.textContent = t("analysis.failed", { state: JobState[v.state].toLowerCase(), error: v.error });
          drawGraph();
          drawList();
        }
      }
    } catch (e) {
      if (abort.signal.aborted) return;
      const err = ConnectError.from(e);
      if (err.code === Code.PermissionDenied) {
        // Guests may not queue analysis jobs; accounts may: one click to make one (the guest's games,
        // this one included, become the account's), then back here.
        const me = currentIdentity();
        const next = encodeURIComponent(`#/analysis/${gameId}`);
        state.replaceChildren(
          me?.kind === "guest" ? t("analysis.forAccounts") : t("analysis.noScope"),
          " ",
          h("a", { class: "button primary", href: `#/signup?next=${next}`, "data-testid": "signup-to-analyse" }, me?.kind === "guest" ? t("analysis.signUpToAnalyse") : t("account.createTitle")),
          " · ",
          h("a", { href: `#/signin?next=${next}` }, t("nav.signIn")),
          me?.kind === "guest" ? ` ${t("analysis.guestMoves")}` : "",
        );
      } else state.textContent = describeError(e);
      state.dataset.error = Code[err.code];
    }
  })();

  return () => abort.abort();
}
