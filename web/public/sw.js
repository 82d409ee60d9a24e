// The service worker: the app installable and an offline page. It answers only GET requests for this
// origin's files; API calls (gRPC-Web: POST to /draughts.v1.<Service>/<Method>) are never touched, never
// cached: they go to the network as if there were no worker.
//   - navigations: the network first; offline, the cached offline page;
//   - /assets/* (content-hashed names): from the cache once fetched (a new build has new names);
//   - anything else (index.html, the manifest, icons): the network, the cached copy when offline.
const CACHE = "draughts-v1";
const OFFLINE = "/offline.html";
const PRECACHE = [OFFLINE, "/offline.css", "/icon.svg", "/manifest.webmanifest"];

self.addEventListener("install", (event) => {
  event.waitUntil(caches.open(CACHE).then((c) => c.addAll(PRECACHE)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((keys) => Promise.all(keys.filter((k) => k !== CACHE).map((k) => caches.delete(k))))
      .then(() => self.clients.claim()),
  );
});

/** Whether a request is an API call (never answered or cached here). */
function isApi(url, request) {
  return request.method !== "GET" || url.pathname.startsWith("/draughts.") || url.pathname.startsWith("/grpc.");
}

self.addEventListener("fetch", (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin || isApi(url, request)) return;
  if (request.mode === "navigate") {
    event.respondWith(fetch(request).catch(() => caches.match(OFFLINE)));
    return;
  }
  if (url.pathname.startsWith("/assets/")) {
    event.respondWith(
      caches.match(request).then(
        (hit) =>
          hit ||
          fetch(request).then((res) => {
            if (res.ok) {
              const copy = res.clone();
              void caches.open(CACHE).then((c) => c.put(request, copy));
            }
            return res;
          }),
      ),
    );
    return;
  }
  event.respondWith(
    fetch(request)
      .then((res) => {
        if (res.ok && PRECACHE.includes(url.pathname)) {
          const copy = res.clone();
          void caches.open(CACHE).then((c) => c.put(request, copy));
        }
        return res;
      })
      .catch(() => caches.match(request).then((hit) => hit || Response.error())),
  );
});
