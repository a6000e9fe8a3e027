"use strict";
// Shared by the dashboard and the org view (decisions DS4, DS5): tables, the token, polling.
// Okabe & Ito's colour-blind-safe palette; dashes tell lines apart beyond eight colours
const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"];
const DASHES = ["solid", "dash", "dot", "dashdot"];
const LAYOUT = {margin: {l: 55, r: 10, t: 30, b: 45}, font: {size: 12},
                legend: {orientation: "h", x: 0, y: 1.02, xanchor: "left", yanchor: "bottom"},
                hovermode: "closest"};
const CONFIG = {responsive: true, displaylogo: false};
const usd = (x) => (x === null || x === undefined) ? "-" : "$" + Number(x).toFixed(4);
const num = (x, d) => (x === null || x === undefined) ? "-" : Number(x).toFixed(d);

// The service's token: given once in the address's fragment (#token=...), which the browser never sends to a
// server, kept for this tab in sessionStorage and sent as a bearer header on every fetch; the fragment is then
// removed from the address bar.
const TOKEN_KEY = "spottune-token";
(function takeToken() {
  const m = location.hash.match(/(?:^#|&)token=([^&]*)/);
  if (m) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
})();

function fill(id, rows) {
  const body = document.querySelector("#" + id + " tbody");
  const out = document.createDocumentFragment();
  for (const r of rows) {
    const tr = document.createElement("tr");
    if (r.attrs) for (const [k, v] of Object.entries(r.attrs)) tr.setAttribute(k, v);
    for (const c of r.cells) {
      const td = document.createElement("td");
      td.textContent = c.text;
      if (c.num) td.className = "num";
      if (c.cls) td.className = c.cls;
      tr.appendChild(td);
    }
    out.appendChild(tr);
  }
  body.replaceChildren(out);
}

// Fetch url every second; render(json) when the answer changed. A refusal (401, 403, 404) is shown in #refusal
// with the service's one-line reason, and the page keeps nothing of what it showed before.
function poll(url, render, onRefused) {
  let last = "";
  async function once() {
    try {
      const token = sessionStorage.getItem(TOKEN_KEY);
      const r = await fetch(url, {cache: "no-store", headers: token ? {Authorization: "Bearer " + token} : {}});
      const text = await r.text();
      if (r.ok) {
        document.getElementById("refusal").textContent = "";
        if (text !== last) { last = text; render(JSON.parse(text)); }
      } else {
        let detail = text;
        try { detail = JSON.parse(text).detail; } catch (e) { /* not JSON */ }
        last = "";
        document.getElementById("refusal").textContent = "refused: " + detail + " (HTTP " + r.status + ")";
        document.body.dataset.refused = String(r.status);
        if (onRefused) onRefused(r.status);
      }
    } catch (e) {
      document.getElementById("status").textContent = "no connection";
    }
    setTimeout(once, 1000);
  }
  once();
}
