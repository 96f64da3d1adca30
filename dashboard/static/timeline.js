// ahpd dashboard: the timeline's scrubber. Without it the select of
// events and its Show button do the same: this only adds a slider over
// them, oldest on the left and now on the right, that says which event
// it is on and shows the session right after it when let go (or on
// Enter, for the keyboard, whose arrows only move it).
(function () {
  "use strict";
  function setUp() {
    var range = document.getElementById("scrub");
    var select = document.getElementById("scrub-at");
    var label = document.getElementById("scrub-label");
    if (!range || !select || range.dataset.ready) { return; }
    range.dataset.ready = "1";
    range.hidden = false;
    if (label) { label.hidden = false; }
    range.value = String(select.selectedIndex);
    var keyed = false;
    function show() {
      var opt = select.options[Number(range.value)];
      if (!opt) { return; }
      select.selectedIndex = Number(range.value);
      if (label) { label.textContent = opt.textContent; }
    }
    function go() { if (select.form.requestSubmit) { select.form.requestSubmit(); } else { select.form.submit(); } }
    show();
    range.addEventListener("input", show);
    range.addEventListener("keydown", function (e) {
      keyed = true;
      if (e.key === "Enter") { e.preventDefault(); go(); }
    });
    range.addEventListener("pointerdown", function () { keyed = false; });
    range.addEventListener("change", function () { if (!keyed) { go(); } });
    select.addEventListener("change", function () { range.value = String(select.selectedIndex); show(); });
  }
  function start() {
    setUp();
    // A live update redraws the timeline, and the scrubber with it.
    var tl = document.getElementById("timeline");
    if (tl && window.MutationObserver) { new MutationObserver(setUp).observe(tl, { childList: true }); }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
