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
    // The focused control keeps focus when its part is redrawn.
    var focused = document.activeElement && el.contains(document.activeElement) && document.activeElement.name;
    el.innerHTML = html;
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
    es.addEventListener("open", function () { if (state) { state.textContent = "Live."; } });
    es.addEventListener("error", function () { if (state) { state.textContent = "Reconnecting…"; } });
    es.addEventListener("rows", function (e) { put("rows", JSON.parse(e.data).rows); });
    ["conversation", "timeline", "actions", "status"].forEach(function (name) {
      es.addEventListener(name, function (e) { put(name, JSON.parse(e.data).html); });
    });
    es.addEventListener("end", function () { es.close(); });
    document.documentElement.dataset.live = "on";
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
