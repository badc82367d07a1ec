(function () {
  "use strict";
  var pipeline = document.getElementById("filter-pipeline");
  var flagged = document.getElementById("filter-hallucinated");
  var text = document.getElementById("filter-text");
  var count = document.getElementById("filter-count");
  function apply() {
    var want = pipeline.value, onlyBad = flagged.checked, words = text.value.toLowerCase().trim();
    var shown = 0;
    document.querySelectorAll("section.question").forEach(function (section) {
      var any = false;
      section.querySelectorAll("article.answer").forEach(function (article) {
        var ok = (!want || article.dataset.pipeline === want) &&
          (!onlyBad || article.dataset.hallucinated === "1") &&
          (!words || article.dataset.search.indexOf(words) !== -1);
        article.classList.toggle("hidden", !ok);
        if (ok) { any = true; shown += 1; }
      });
      section.classList.toggle("hidden", !any);
    });
    count.textContent = shown + " answers shown";
  }
  [pipeline, flagged].forEach(function (el) { el.addEventListener("change", apply); });
  text.addEventListener("input", apply);
  function reveal(id) {
    var target = document.getElementById(id);
    if (!target || target.tagName !== "DETAILS") { return; }
    target.open = true;
    document.querySelectorAll("details.focus").forEach(function (d) { d.classList.remove("focus"); });
    target.classList.add("focus");
  }
  document.addEventListener("click", function (event) {
    var link = event.target.closest("a.claim");
    if (link) { reveal(link.getAttribute("href").slice(1)); }
  });
  if (location.hash) { reveal(location.hash.slice(1)); }
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  });
  apply();
})();
