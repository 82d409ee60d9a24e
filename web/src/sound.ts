// Optional sounds for a move, a capture and the end of a game: tones made with WebAudio (no files to
// load). Off by default; switched on from the game page (that click is the user gesture browsers ask
// for before they let a page make sound) and kept in localStorage.
const KEY = "draughts.sound";
let ctx: AudioContext | null = null;

export function soundOn(): boolean {
  try {
    return localStorage.getItem(KEY) === "on";
  } catch {
    return false;
  }
}

export function setSound(on: boolean): void {
  try {
    localStorage.setItem(KEY, on ? "on" : "off");
  } catch {
    // Private mode: for this page only.
  }
  if (on) audio();
}

function audio(): AudioContext | null {
  if (!ctx && typeof AudioContext === "function") ctx = new AudioContext();
  if (ctx?.state === "suspended") void ctx.resume();
  return ctx;
}

/** Tones: [frequency Hz, start s, length s]. */
function play(tones: [number, number, number][], type: OscillatorType = "sine", gain = 0.15) {
  if (!soundOn()) return;
  const a = audio();
  if (!a) return;
  const now = a.currentTime;
  for (const [f, at, len] of tones) {
    const o = a.createOscillator();
    const g = a.createGain();
    o.type = type;
    o.frequency.value = f;
    g.gain.setValueAtTime(gain, now + at);
    g.gain.exponentialRampToValueAtTime(0.001, now + at + len);
    o.connect(g).connect(a.destination);
    o.start(now + at);
    o.stop(now + at + len);
  }
  played.count++;
}

/** How many sounds were played (the tests read it from the page). */
export const played = { count: 0 };
(window as unknown as { __draughtsSounds: typeof played }).__draughtsSounds = played;

export const sounds = {
  move: () => play([[520, 0, 0.08]], "triangle"),
  capture: () => play([[330, 0, 0.07], [250, 0.07, 0.1]], "square", 0.08),
  end: () => play([[523, 0, 0.15], [659, 0.15, 0.15], [784, 0.3, 0.3]]),
};
