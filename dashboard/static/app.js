// ahpd dashboard: live updates. The pages work without it; with it, an
// element carrying data-live="URL" opens that Server-Sent Events stream
// and each event's HTML, rendered by the server, replaces its part.
(function () {
  "use strict";
  function byId(id) { return document.getElementById(id); }
  function nearBottom() {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
  }
  function put(id, html) {
    var el = byId(id);
    if (!el) { return; }
    var stick = id === "conversation" && nearBottom();
    // The focused control keeps focus when its part is redrawn, and an
    // answer being typed or picked keeps what it has.
    var focused = document.activeElement && el.contains(document.activeElement) && document.activeElement.name;
    var kept = [];
    el.querySelectorAll("form.answer input").forEach(function (input) {
      if (input.type === "hidden") { return; }
      kept.push({ form: input.form.elements.request.value, name: input.name, value: input.value,
        checked: input.checked, typed: input.type !== "radio" && input.type !== "checkbox" });
    });
    el.innerHTML = html;
    kept.forEach(function (k) {
      el.querySelectorAll("form.answer").forEach(function (form) {
        if (form.elements.request.value !== k.form) { return; }
        form.querySelectorAll("input").forEach(function (input) {
          if (input.name !== k.name) { return; }
          if (k.typed) { input.value = k.value; } else if (input.value === k.value) { input.checked = k.checked; }
        });
      });
    });
    if (focused) {
      var again = el.querySelector('[name="' + focused + '"]');
      if (again) { again.focus(); }
    }
    if (stick) { window.scrollTo(0, document.body.scrollHeight); }
  }
  function start() {
    var el = document.querySelector("[data-live]");
    if (!el || !el.dataset.live || !window.EventSource) { return; }
    var state = document.querySelector(".live-state");
    var es = new EventSource(el.dataset.live);
    var root = document.documentElement;
    es.addEventListener("synced", function () {
      root.dataset.synced = "on";
      if (state) { state.textContent = "Live."; }
    });
    es.addEventListener("error", function () {
      delete root.dataset.synced;
      // A stream the server refused (a 429 past the live pages' bounds,
      // a 401 once signed out) is not tried again by the browser.
      var closed = es.readyState === EventSource.CLOSED;
      if (state) { state.textContent = closed ? "Not live: reload the page to try again." : "Reconnecting…"; }
    });
    es.addEventListener("rows", function (e) { put("rows", JSON.parse(e.data).rows); });
    ["conversation", "timeline", "actions", "status", "automations"].forEach(function (name) {
      es.addEventListener(name, function (e) { put(name, JSON.parse(e.data).html); });
    });
    es.addEventListener("end", function () { es.close(); });
    root.dataset.live = "on";
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();

// Times to read in the viewer's own zone: each <time class="local"
// datetime=...> the server wrote in the automation's zone (or UTC) is
// shown in the browser's, with how far off it is ("in 5 minutes"), the
// server's reading kept as its title. Parts a live update redraws are
// done again.
(function () {
  "use strict";
  var rel = window.Intl && Intl.RelativeTimeFormat ? new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }) : null;
  function relative(ms) {
    if (!rel) { return ""; }
    var s = Math.round(ms / 1000), a = Math.abs(s);
    if (a < 60) { return rel.format(s, "second"); }
    if (a < 3600) { return rel.format(Math.round(s / 60), "minute"); }
    if (a < 172800) { return rel.format(Math.round(s / 3600), "hour"); }
    return rel.format(Math.round(s / 86400), "day");
  }
  function localize(root) {
    (root || document).querySelectorAll("time.local[datetime]").forEach(function (el) {
      var t = new Date(el.getAttribute("datetime"));
      if (isNaN(t.getTime())) { return; }
      var opts = { weekday: "short", year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", timeZoneName: "short" };
      if (t.getSeconds() !== 0) { opts.second = "2-digit"; }
      var r = relative(t.getTime() - Date.now());
      var text = t.toLocaleString(undefined, opts) + (r ? " (" + r + ")" : "");
      if (el.textContent !== text) { el.textContent = text; }
      el.dataset.localized = "on";
    });
  }
  function start() {
    // A live page may be sent such times later (an automation made).
    if (!document.querySelector("time.local, [data-live]")) { return; }
    localize(document);
    // Redrawn parts are done again; a time this rewrote is not a redraw.
    new MutationObserver(function (changes) {
      if (changes.some(function (m) { return !(m.target.matches && m.target.matches("time.local")); })) { localize(document); }
    }).observe(document.body, { childList: true, subtree: true });
    setInterval(function () { localize(document); }, 15000);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
