// ahpd dashboard: conversing. Code blocks in the conversation are
// highlighted (comments, strings, numbers, keywords), again whenever a
// live update redraws the conversation; the highlighter only splits a
// block's text into text nodes and spans, so nothing in it is ever read
// as HTML. Ctrl+Enter (or Cmd+Enter) sends the composer's message. The
// pages work without this script.
(function () {
  "use strict";
  var keywords = {};
  ("break case catch chan class const continue def default defer del do elif else elsif enum except export " +
    "extends false fi finally fn for from func function go goto if impl import in interface is lambda let " +
    "loop map match mod mut new nil none null package pass pub raise range return select self static struct " +
    "super switch then this throw true try type typeof undefined use var void while with yield async await " +
    "None True False local end echo esac done").split(" ").forEach(function (k) { keywords[k] = true; });
  var hashComments = { sh: 1, bash: 1, shell: 1, zsh: 1, console: 1, python: 1, py: 1, ruby: 1, rb: 1,
    yaml: 1, yml: 1, toml: 1, perl: 1, r: 1, make: 1, makefile: 1, dockerfile: 1, ini: 1, conf: 1 };
  var maxCode = 100000;

  // The language a block says it is in: goldmark writes class="language-X".
  function languageOf(code) {
    var m = /(?:^|\s)language-([\w+-]+)/.exec(code.className || "");
    return m ? m[1].toLowerCase() : "";
  }

  function tokenRe(lang) {
    var parts = ["\\/\\*[\\s\\S]*?(?:\\*\\/|$)", "\\/\\/[^\\n]*"];
    if (hashComments[lang]) { parts.push("#[^\\n]*"); }
    if (lang === "sql" || lang === "lua" || lang === "haskell") { parts.push("--[^\\n]*"); }
    var comment = "(" + parts.join("|") + ")";
    var string = "(\"(?:[^\"\\\\\\n]|\\\\.)*\"?|'(?:[^'\\\\\\n]|\\\\.)*'?|`[^`]*`?)";
    var number = "(\\b\\d[\\w.]*)";
    var word = "([A-Za-z_$][\\w$]*)";
    return new RegExp(comment + "|" + string + "|" + number + "|" + word, "g");
  }

  function span(cls, text) {
    var s = document.createElement("span");
    s.className = cls;
    s.textContent = text;
    return s;
  }

  function highlight(code) {
    if (code.dataset.hl) { return; }
    code.dataset.hl = "1";
    var text = code.textContent;
    if (text.length > maxCode) { return; }
    var re = tokenRe(languageOf(code));
    var out = document.createDocumentFragment();
    var last = 0, m;
    while ((m = re.exec(text)) !== null) {
      if (m[0] === "") { re.lastIndex++; continue; }
      var cls = m[1] ? "tok-c" : m[2] ? "tok-s" : m[3] ? "tok-n" : keywords[m[4]] ? "tok-k" : "";
      if (!cls) { continue; }
      if (m.index > last) { out.appendChild(document.createTextNode(text.slice(last, m.index))); }
      out.appendChild(span(cls, m[0]));
      last = m.index + m[0].length;
    }
    if (last < text.length) { out.appendChild(document.createTextNode(text.slice(last))); }
    code.textContent = "";
    code.appendChild(out);
    code.classList.add("hl");
  }

  function highlightAll(root) {
    root.querySelectorAll(".md pre > code").forEach(highlight);
  }

  function start() {
    var conv = document.getElementById("conversation");
    if (conv) {
      highlightAll(conv);
      // A live update replaces the conversation's HTML: highlight the
      // new blocks (a block done already is marked data-hl).
      new MutationObserver(function () { highlightAll(conv); }).observe(conv, { childList: true, subtree: true });
    }
    document.querySelectorAll("form.composer textarea, form.new-chat textarea, form.start textarea").forEach(function (ta) {
      ta.addEventListener("keydown", function (e) {
        if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && ta.form) {
          e.preventDefault();
          var send = ta.form.querySelector('button[type="submit"]');
          if (ta.form.requestSubmit) { ta.form.requestSubmit(send || undefined); } else if (send) { send.click(); }
        }
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
