(function () {
  "use strict";
  // People's review of the sampled answers: marks kept in localStorage per run fingerprint,
  // exported as labels.jsonl (auditor report --labels). Reads only data- attributes and
  // writes only textContent: nothing from a model or a document is ever parsed as HTML.
  var runs = Array.prototype.slice.call(document.querySelectorAll("section.review-run"));
  var download = document.getElementById("review-download");
  if (!runs.length || !download) { return; }
  var total = document.getElementById("review-total");
  var storageNote = document.getElementById("review-storage");
  var PREFIX = "auditor-review:";
  var store = null;
  try {
    store = window.localStorage;
    store.getItem(PREFIX + "probe");
  } catch (err) {
    store = null;
  }
  if (!store) { storageNote.textContent = "(this browser keeps no marks across reloads: download them before closing)"; }

  function load(fingerprint) {
    var marks = {};
    if (!store) { return marks; }
    try {
      var saved = JSON.parse(store.getItem(PREFIX + fingerprint) || "{}");
      if (saved && typeof saved.answers === "object" && saved.answers) { marks = saved.answers; }
    } catch (err) {
      marks = {};
    }
    return marks;
  }

  var items = [];
  var state = runs.map(function (section, runIndex) {
    var run = {
      section: section,
      pipeline: section.dataset.pipeline,
      fingerprint: section.dataset.fingerprint,
      progress: section.querySelector(".review-progress"),
      items: [],
      marks: load(section.dataset.fingerprint)
    };
    section.querySelectorAll("article.review-item").forEach(function (article) {
      var item = { run: runIndex, article: article, id: article.dataset.id };
      run.items.push(item);
      items.push(item);
    });
    return run;
  });

  function markOf(item) {
    var marks = state[item.run].marks;
    var mark = marks[item.id];
    if (!mark || typeof mark !== "object") {
      mark = { hallucinated: null, claims: {}, note: "" };
      marks[item.id] = mark;
    }
    if (!mark.claims || typeof mark.claims !== "object") { mark.claims = {}; }
    return mark;
  }

  function save(run) {
    if (!store) { return; }
    try {
      store.setItem(PREFIX + run.fingerprint, JSON.stringify({ version: 1, answers: run.marks }));
    } catch (err) {
      storageNote.textContent = "(could not keep the marks in this browser: download them before closing)";
    }
  }

  function pressed(button, on) { button.setAttribute("aria-pressed", on ? "true" : "false"); }

  function show(item) {
    var mark = markOf(item);
    var article = item.article;
    article.querySelectorAll("button[data-mark]").forEach(function (button) {
      pressed(button, mark.hallucinated === (button.dataset.mark === "yes"));
    });
    article.classList.toggle("marked-yes", mark.hallucinated === true);
    article.classList.toggle("marked-no", mark.hallucinated === false);
    article.querySelectorAll("li.review-claim").forEach(function (li) {
      var verdict = mark.claims[li.dataset.claim];
      li.querySelectorAll("button[data-judge]").forEach(function (button) {
        pressed(button, verdict === (button.dataset.judge === "right"));
      });
    });
    var note = article.querySelector("input.review-note");
    if (note && note !== document.activeElement) { note.value = typeof mark.note === "string" ? mark.note : ""; }
  }

  function reviewed(run) {
    return run.items.filter(function (item) {
      var mark = run.marks[item.id];
      return mark && typeof mark.hallucinated === "boolean";
    }).length;
  }

  function counts() {
    var all = 0;
    state.forEach(function (run) {
      var done = reviewed(run);
      all += done;
      run.progress.textContent = done + " of " + run.items.length + " reviewed";
    });
    total.textContent = all + " label" + (all === 1 ? "" : "s") + " to download";
    download.disabled = all === 0;
  }

  function changed(item) {
    save(state[item.run]);
    show(item);
    counts();
  }

  var current = -1;
  function select(index, scroll) {
    if (index < 0 || index >= items.length) { return; }
    if (current >= 0) { items[current].article.classList.remove("current"); }
    current = index;
    var article = items[current].article;
    article.classList.add("current");
    if (scroll) {
      article.scrollIntoView({ block: "start" });
      article.focus({ preventScroll: true });
    }
  }

  function setAnswer(item, value, toggle) {
    var mark = markOf(item);
    mark.hallucinated = toggle && mark.hallucinated === value ? null : value;
    changed(item);
  }

  items.forEach(function (item, index) {
    var article = item.article;
    article.addEventListener("click", function (event) {
      select(index, false);
      var button = event.target.closest("button");
      if (!button || !article.contains(button)) { return; }
      if (button.dataset.mark) {
        setAnswer(item, button.dataset.mark === "yes", true);
      } else if (button.dataset.judge) {
        var claim = button.closest("li.review-claim").dataset.claim;
        var mark = markOf(item);
        var right = button.dataset.judge === "right";
        if (mark.claims[claim] === right) { delete mark.claims[claim]; } else { mark.claims[claim] = right; }
        changed(item);
      }
    });
    article.addEventListener("focusin", function () { select(index, false); });
    var note = article.querySelector("input.review-note");
    if (note) {
      note.addEventListener("input", function () {
        markOf(item).note = note.value;
        save(state[item.run]);
      });
    }
    show(item);
  });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) { return; }
    var target = event.target;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) { return; }
    var key = event.key;
    if (key === "j") {
      select(Math.min(current + 1, items.length - 1), true);
    } else if (key === "k") {
      select(Math.max(current - 1, 0), true);
    } else if ((key === "y" || key === "n") && items.length) {
      if (current < 0) { select(0, true); }
      setAnswer(items[current], key === "y", false);
    } else {
      return;
    }
    event.preventDefault();
  });

  function labels() {
    var lines = [];
    state.forEach(function (run) {
      run.items.forEach(function (item) {
        var mark = run.marks[item.id];
        if (!mark || typeof mark.hallucinated !== "boolean") { return; }
        var label = { id: item.id, pipeline: run.pipeline, hallucinated: mark.hallucinated, fingerprint: run.fingerprint };
        var claims = Object.keys(mark.claims || {}).filter(function (k) {
          return /^[0-9]+$/.test(k) && typeof mark.claims[k] === "boolean";
        }).map(Number).sort(function (a, b) { return a - b; });
        if (claims.length) {
          label.claims = claims.map(function (k) { return { index: k, judge_right: mark.claims[k] }; });
        }
        if (typeof mark.note === "string" && mark.note.trim()) { label.note = mark.note.trim(); }
        lines.push(JSON.stringify(label) + "\n");
      });
    });
    return lines;
  }

  download.addEventListener("click", function () {
    var lines = labels();
    if (!lines.length) { return; }
    var url = URL.createObjectURL(new Blob(lines, { type: "application/x-ndjson" }));
    var link = document.createElement("a");
    link.href = url;
    link.download = "labels.jsonl";
    link.hidden = true;
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 60000);
    total.textContent = lines.length + " label" + (lines.length === 1 ? "" : "s") + " saved as labels.jsonl";
  });

  counts();
  if (items.length) { select(0, false); }
})();
