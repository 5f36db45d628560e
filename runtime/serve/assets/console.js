// Keeps the console's pages current without a reload: on each `change` event from
// /events, it fetches the page again and swaps the regions marked `data-live`.
// A region with `data-flow-ids` is refreshed only when one of its flows changed; a region
// with `data-live-keyed` keeps its children that have the same `data-key` (a gate form being
// filled in stays as it is) and adds or drops the others. Pages work without this script.
(function () {
  "use strict";
  if (!window.EventSource || !window.fetch || !window.DOMParser) return;
  if (!document.querySelector("[data-live]")) return;
  var live = document.getElementById("live");
  var busy = false;
  var again = false;

  function wanted(changed) {
    if (changed === "*") return true;
    var ids = changed.split(" ");
    var regions = document.querySelectorAll("[data-live]");
    for (var i = 0; i < regions.length; i++) {
      var watched = regions[i].getAttribute("data-flow-ids");
      if (!watched) return true;
      var mine = watched.split(" ");
      for (var j = 0; j < ids.length; j++) {
        if (mine.indexOf(ids[j]) >= 0) return true;
      }
    }
    return false;
  }

  function merge(region, fresh) {
    var kept = {};
    Array.prototype.forEach.call(region.children, function (child) {
      var key = child.getAttribute("data-key");
      if (key) kept[key] = child;
    });
    var nodes = Array.prototype.map.call(fresh.children, function (child) {
      var key = child.getAttribute("data-key");
      return key && kept[key] ? kept[key] : document.importNode(child, true);
    });
    region.replaceChildren.apply(region, nodes);
  }

  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { accept: "text/html" } })
      .then(function (answer) {
        if (!answer.ok) throw new Error("status " + answer.status);
        return answer.text();
      })
      .then(function (text) {
        var page = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (region) {
          var name = region.getAttribute("data-live");
          var fresh = page.querySelector('[data-live="' + name + '"]');
          if (!fresh) return;
          if (region.hasAttribute("data-live-keyed")) merge(region, fresh);
          else region.replaceWith(document.importNode(fresh, true));
        });
      })
      .catch(function () {})
      .then(function () {
        // At most one refresh a second, however busy the store.
        setTimeout(function () {
          busy = false;
          if (again) {
            again = false;
            refresh();
          }
        }, 1000);
      });
  }

  var source = new EventSource("/events");
  source.addEventListener("open", function () {
    if (live) live.textContent = "Live";
    // What changed between the page's rendering and this (re)connection was not announced.
    refresh();
  });
  source.addEventListener("error", function () {
    if (live) live.textContent = "Reconnecting…";
  });
  source.addEventListener("change", function (event) {
    if (wanted(event.data)) refresh();
  });
  // An agent run's live tail changes without its flow changing: while the page shows a
  // running one, it is refreshed every two seconds.
  setInterval(function () {
    if (document.querySelector("[data-running-agent]")) refresh();
  }, 2000);
})();
