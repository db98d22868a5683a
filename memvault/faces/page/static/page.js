// memvault's page: the keys, and nothing the page needs to be read (every page works without this file).
//   j / k     the next / previous item (a memory, a result, a change, a fact to review)
//   Enter     open the focused item      /  the search box      n  the next page      ?  the keys
//   On a fact to review: y keep it, e edit then keep, r reject it (each a form the page has anyway).
(function () {
  "use strict";
  var items = function () { return Array.prototype.slice.call(document.querySelectorAll(".item")); };
  var current = function () {
    var list = items(), at = list.indexOf(document.activeElement);
    if (at < 0 && document.activeElement) {
      var holder = document.activeElement.closest && document.activeElement.closest(".item");
      at = holder ? list.indexOf(holder) : -1;
    }
    return at;
  };
  var focusItem = function (at) {
    var list = items();
    if (!list.length) { return; }
    at = Math.max(0, Math.min(list.length - 1, at));
    list[at].focus();
    list[at].scrollIntoView({block: "nearest"});
    try { sessionStorage.setItem("memvault-at:" + location.pathname, String(at)); } catch (e) { /* private mode */ }
  };
  var typing = function (el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  };
  var help;
  var showHelp = function () {
    if (help) { help.remove(); help = null; return; }
    help = document.createElement("div");
    help.className = "keys-help";
    help.setAttribute("role", "dialog");
    help.setAttribute("aria-label", "Keys");
    var lines = ["j / k: next, previous", "Enter: open", "/: search", "n: next page", "?: close this"];
    if (document.querySelector(".review-item")) { lines.push("y: keep", "e: edit, then keep", "r: reject"); }
    lines.forEach(function (text) { var p = document.createElement("p"); p.textContent = text; help.appendChild(p); });
    document.body.appendChild(help);
  };
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) {
      if (event.key === "Escape" && typing(event.target)) { event.target.blur(); }
      return;
    }
    var at = current(), list = items(), item = at >= 0 ? list[at] : null;
    switch (event.key) {
      case "j": focusItem(at + 1); break;
      case "k": focusItem(at < 0 ? 0 : at - 1); break;
      case "Enter":
        if (item && event.target === item) {
          var open = item.querySelector("a.open") || item.querySelector("a");
          if (open) { open.click(); }
        }
        return;
      case "/":
        var box = document.querySelector("#f-query") || document.querySelector("input[type=search]");
        if (box) { box.focus(); } else { location.href = "/search"; }
        break;
      case "n":
        var next = document.querySelector("a.next-page");
        if (next) { next.click(); }
        break;
      case "?": showHelp(); break;
      case "y": case "r":
        if (!item) { return; }
        var form = item.querySelector("form[data-key='" + event.key + "']");
        if (!form) { return; }
        try { sessionStorage.setItem("memvault-at:" + location.pathname, String(at)); } catch (e) { /* ignore */ }
        form.submit();
        break;
      case "e":
        if (!item) { return; }
        var editor = item.querySelector("details[data-key='e']");
        if (!editor) { return; }
        editor.open = true;
        var area = editor.querySelector("textarea");
        if (area) { area.focus(); }
        break;
      default: return;
    }
    event.preventDefault();
  });
  // Back on a list after a change (a review answer): the item at the same place, now the next one.
  document.addEventListener("DOMContentLoaded", function () {
    var saved = null;
    try { saved = sessionStorage.getItem("memvault-at:" + location.pathname); } catch (e) { /* ignore */ }
    if (saved !== null && document.querySelector(".review-item")) { focusItem(parseInt(saved, 10) || 0); }
  });
}());
