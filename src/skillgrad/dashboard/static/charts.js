// skillgrad dashboard: a chart point's value at once, on hover. Each point carries it in its
// SVG <title> (which the browser also shows, after a delay, with no script at all); here it
// becomes a tooltip beside the point. Listened for on the document, so that the content the
// live script swaps in needs nothing more.
(function () {
  "use strict";
  var tip = null;

  function text(pt) {
    if (pt.dataset.tip === undefined) {
      var title = pt.querySelector("title");
      pt.dataset.tip = title ? title.textContent : "";
      if (title) {
        title.remove();  // the browser's own tooltip would show it a second time
        pt.setAttribute("aria-label", pt.dataset.tip);
      }
    }
    return pt.dataset.tip;
  }

  function show(pt) {
    var words = text(pt);
    if (!words) {
      return;
    }
    if (!tip) {
      tip = document.createElement("div");
      tip.className = "chart-tip";
      tip.setAttribute("role", "tooltip");
      document.body.appendChild(tip);
    }
    tip.textContent = words;
    tip.hidden = false;
    pt.classList.add("hovered");
    var box = pt.getBoundingClientRect();
    var page = document.documentElement;
    var left = box.left + box.width / 2 - tip.offsetWidth / 2;
    left = Math.max(4, Math.min(left, page.clientWidth - tip.offsetWidth - 4));
    var top = box.top - tip.offsetHeight - 8;
    if (top < 4) {
      top = box.bottom + 8;
    }
    tip.style.left = (left + window.scrollX) + "px";
    tip.style.top = (top + window.scrollY) + "px";
  }

  function hide(pt) {
    pt.classList.remove("hovered");
    if (tip) {
      tip.hidden = true;
    }
  }

  function point(event) {
    return event.target.closest ? event.target.closest("svg.chart .pt") : null;
  }

  document.addEventListener("mouseover", function (event) {
    var pt = point(event);
    if (pt) {
      show(pt);
    } else if (tip && !tip.hidden) {
      tip.hidden = true;  // its point was swapped out by the live script under the pointer
    }
  });
  document.addEventListener("mouseout", function (event) {
    var pt = point(event);
    if (pt) {
      hide(pt);
    }
  });
})();
