// The reference web client: hash routes over the API's gRPC-Web endpoint on this page's own origin.
import "./style.css";
import { analysisPage } from "./analysis.js";
import { startPlayerEvents } from "./events.js";
import { gamePage } from "./game.js";
import { invitePage } from "./invite.js";
import { lobbyPage } from "./lobby.js";

const root = document.getElementById("app")!;
let cleanup: () => void = () => {};

function route() {
  cleanup();
  const [path] = location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean);
  if (parts[0] === "game" && parts[1]) cleanup = gamePage(root, parts[1]);
  else if (parts[0] === "invite" && parts[1]) cleanup = invitePage(root, parts[1]);
  else if (parts[0] === "analysis" && parts[1]) cleanup = analysisPage(root, parts[1]);
  else cleanup = lobbyPage(root);
}

window.addEventListener("hashchange", route);
route();
// The event stream needs an identity (a CreateGuest on a first visit): let the first paint go first.
setTimeout(startPlayerEvents, 300);
