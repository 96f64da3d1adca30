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
    ["conversation", "timeline", "actions", "status"].forEach(function (name) {
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
