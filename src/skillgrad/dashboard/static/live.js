// skillgrad dashboard: keep the page current while a run trains. The page names a cheap
// fingerprint of what it shows (data-version-url); when it changes, the page is fetched
// again and its main content swapped in place (no reload: the scroll position, the open
// <details> and the ticked boxes stay).
(function () {
  "use strict";
  var main = document.getElementById("content");
  if (!main || !main.dataset.versionUrl) {
    return;
  }
  var busy = false;

  function remember() {
    var open = [], ticked = [];
    main.querySelectorAll("details[open]").forEach(function (d, i) {
      open.push(d.id || (d.closest("[id]") || {}).id + ":" + i);
    });
    main.querySelectorAll("input[type=checkbox]:checked").forEach(function (c) {
      ticked.push(c.name + "=" + c.value);
    });
    return {open: open, ticked: ticked};
  }

  function restore(kept) {
    main.querySelectorAll("details").forEach(function (d, i) {
      if (kept.open.indexOf(d.id || (d.closest("[id]") || {}).id + ":" + i) >= 0) {
        d.open = true;
      }
    });
    main.querySelectorAll("input[type=checkbox]").forEach(function (c) {
      if (kept.ticked.indexOf(c.name + "=" + c.value) >= 0) {
        c.checked = true;
      }
    });
  }

  function swap(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var fresh = doc.getElementById("content");
    if (!fresh) {
      return;
    }
    var kept = remember();
    main.innerHTML = fresh.innerHTML;
    main.dataset.version = fresh.dataset.version;
    document.title = doc.title;
    restore(kept);
  }

  function tick() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    fetch(main.dataset.versionUrl, {cache: "no-store", credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data || data.version === main.dataset.version) {
          return null;
        }
        return fetch(window.location.href, {cache: "no-store", credentials: "same-origin"})
          .then(function (r) { return r.ok ? r.text() : null; })
          .then(function (html) { if (html) { swap(html); } });
      })
      .catch(function () { /* the server is restarting or gone: try at the next tick */ })
      .then(function () { busy = false; });
  }

  setInterval(tick, parseInt(main.dataset.pollMs, 10) || 1500);
})();
