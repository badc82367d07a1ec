(function () {
  "use strict";
  // People's review of the sampled answers: marks kept in localStorage per run fingerprint,
  // exported as labels.jsonl (auditor report --labels, check --examples, calibrate --labels).
  // Reads only data- attributes and JSON.parse of the report's application/json blocks, and
  // writes only textContent: nothing from a model or a document is ever parsed as HTML.
  var runs = Array.prototype.slice.call(document.querySelectorAll("section.review-run"));
  var download = document.getElementById("review-download");
  if (!runs.length || !download) { return; }
  var total = document.getElementById("review-total");
  var storageNote = document.getElementById("review-storage");
  var reviewerInput = document.getElementById("review-reviewer");
  var message = document.getElementById("review-message");
  var PREFIX = "auditor-review:";
  var REVIEWER_KEY = PREFIX + "reviewer";
  // 2: [id, mark] pairs (1 kept a plain object keyed by answer id: an id "__proto__" broke it)
  var VERSION = 2;
  var store = null;
  try {
    store = window.localStorage;
    store.getItem(PREFIX + "probe");
  } catch (err) {
    store = null;
  }
  if (!store) { storageNote.textContent = "(this browser keeps no marks across reloads: download them before closing)"; }

  function parsed(element, fallback) {
    if (!element) { return fallback; }
    try {
      var value = JSON.parse(element.textContent);
      return value && typeof value === "object" ? value : fallback;
    } catch (err) {
      return fallback;
    }
  }

  function emptyMark() {
    return { hallucinated: null, claims: new Map(), note: "", reviewer: "", labelledAt: "" };
  }

  // a stored mark, every field checked: storage is the browser's, any page could have written it
  function readMark(saved) {
    var mark = emptyMark();
    if (typeof saved.hallucinated === "boolean") { mark.hallucinated = saved.hallucinated; }
    if (Array.isArray(saved.claims)) {
      saved.claims.forEach(function (pair) {
        if (Array.isArray(pair) && Number.isInteger(pair[0]) && pair[0] >= 0 && typeof pair[1] === "boolean") {
          mark.claims.set(pair[0], pair[1]);
        }
      });
    }
    ["note", "reviewer"].forEach(function (key) {
      if (typeof saved[key] === "string") { mark[key] = saved[key]; }
    });
    if (typeof saved.labelled_at === "string") { mark.labelledAt = saved.labelled_at; }
    return mark;
  }

  var older = false;
  function load(fingerprint) {
    var marks = new Map();
    if (!store) { return marks; }
    try {
      var saved = JSON.parse(store.getItem(PREFIX + fingerprint) || "null");
      if (saved && saved.version === VERSION && Array.isArray(saved.answers)) {
        saved.answers.forEach(function (entry) {
          if (Array.isArray(entry) && typeof entry[0] === "string" && entry[1] && typeof entry[1] === "object") {
            marks.set(entry[0], readMark(entry[1]));
          }
        });
      } else if (saved) {
        older = true;  // another version's marks: not read (they are overwritten on a mark)
      }
    } catch (err) {
      marks = new Map();
    }
    return marks;
  }

  var items = [];
  var state = runs.map(function (section, runIndex) {
    var judge = parsed(section.querySelector("script.review-run-data"), {});
    var run = {
      section: section,
      pipeline: section.dataset.pipeline,
      fingerprint: section.dataset.fingerprint,
      progress: section.querySelector(".review-progress"),
      rate: section.querySelector(".review-rate-value"),
      population: Number.isInteger(judge.population) ? judge.population : 0,
      flagged: Number.isInteger(judge.flagged) ? judge.flagged : 0,
      items: [],
      marks: load(section.dataset.fingerprint)
    };
    section.querySelectorAll("article.review-item").forEach(function (article) {
      var data = parsed(article.querySelector("script.review-data"), {});
      var item = { run: runIndex, article: article, id: article.dataset.id, data: data };
      run.items.push(item);
      items.push(item);
    });
    return run;
  });
  if (older) { storageNote.textContent = "(marks kept by an older version of this page are not read)"; }

  if (reviewerInput && store) {
    try { reviewerInput.value = store.getItem(REVIEWER_KEY) || ""; } catch (err) { reviewerInput.value = ""; }
  }
  function reviewer() { return reviewerInput ? reviewerInput.value.trim() : ""; }
  if (reviewerInput) {
    reviewerInput.addEventListener("input", function () {
      if (store) {
        try { store.setItem(REVIEWER_KEY, reviewerInput.value); } catch (err) { /* kept in the page */ }
      }
      if (reviewer()) { message.textContent = ""; }
    });
  }
  // a mark needs a name: each label says who made it
  function signed() {
    if (reviewer()) {
      message.textContent = "";
      return true;
    }
    message.textContent = "Type your name first: each label says who marked it.";
    if (reviewerInput) {
      reviewerInput.scrollIntoView({ block: "center" });
      reviewerInput.focus();
    }
    return false;
  }

  function markOf(item) {
    var marks = state[item.run].marks;
    var mark = marks.get(item.id);
    if (!mark) {
      mark = emptyMark();
      marks.set(item.id, mark);
    }
    return mark;
  }

  function save(run) {
    if (!store) { return; }
    var answers = [];
    run.marks.forEach(function (mark, id) {
      answers.push([id, {
        hallucinated: mark.hallucinated,
        claims: Array.from(mark.claims.entries()),
        note: mark.note,
        reviewer: mark.reviewer,
        labelled_at: mark.labelledAt
      }]);
    });
    try {
      store.setItem(PREFIX + run.fingerprint, JSON.stringify({ version: VERSION, answers: answers }));
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
      var verdict = mark.claims.get(Number(li.dataset.claim));
      li.querySelectorAll("button[data-judge]").forEach(function (button) {
        pressed(button, verdict === (button.dataset.judge === "right"));
      });
    });
    var note = article.querySelector("input.review-note");
    if (note && note !== document.activeElement) { note.value = mark.note; }
  }

  function labelled(run, item) {
    var mark = run.marks.get(item.id);
    return Boolean(mark) && typeof mark.hallucinated === "boolean";
  }

  // --- the provisional rate: auditor.reviewed.reviewed_rate, ported line for line ---------
  // (tests/test_reviewed_estimator.py runs this block, to the end marker, under node and
  // compares it with Python on random cases)
  var Z95 = 1.959963984540054;
  var MIN_FOR_JUDGE = 10;
  var HALF_WIDTHS = [0.05, 0.10];

  function sum(xs) { return xs.reduce(function (a, b) { return a + b; }, 0); }
  function mean(xs) { return sum(xs) / xs.length; }

  function wilsonAt(share, effective) {  // reviewed._wilson
    var z2 = Z95 * Z95;
    var centre = (share + z2 / (2 * effective)) / (1 + z2 / effective);
    var half = Z95 * Math.sqrt(share * (1 - share) / effective + z2 / (4 * effective * effective)) / (1 + z2 / effective);
    return [Math.max(0, centre - half), Math.min(1, centre + half)];
  }

  function labelsOnly(positives, n, population) {  // reviewed.labels_only_interval
    if (n === 0) { return [0, 1]; }
    if (n >= population) { return [positives / n, positives / n]; }
    return wilsonAt(positives / n, n * (population - 1) / (population - n));
  }

  function unseenErrorVariance(n) {  // reviewed._unseen_error_variance
    var d = (Z95 * Z95 / 2) / (n + Z95 * Z95);
    return d * (1 - d);
  }

  function labelsVariance(positives, n) {  // reviewed._labels_variance
    var p = (positives + Z95 * Z95 / 2) / (n + Z95 * Z95);
    return p * (1 - p);
  }

  // reviewed._difference (bounded): [theta, low, high, residual variance, weight] or null
  function difference(y, f, everyone) {
    var n = y.length;
    var population = everyone.length;
    var everyoneMean = mean(everyone);
    var spread = sum(everyone.map(function (v) { return (v - everyoneMean) * (v - everyoneMean); })) / (population - 1);
    if (!(spread > 0) || n < 3) { return null; }
    var ym = mean(y);
    var fm = mean(f);
    var covariance = sum(y.map(function (v, i) { return (v - ym) * (f[i] - fm); })) / (n - 1);
    var weight = Math.min(1, Math.max(0, covariance / spread));
    if (weight <= 1e-9) { return null; }
    var residuals = y.map(function (v, i) { return v - weight * f[i]; });
    var rm = mean(residuals);
    var value = weight * everyoneMean + rm;
    var residual = sum(residuals.map(function (e) { return (e - rm) * (e - rm); })) / (n - 2);
    residual = Math.max(residual, unseenErrorVariance(n));
    var variance = (1 - n / population) * residual / n;
    var share = Math.min(1, Math.max(0, value));
    if (share === 0 || share === 1) { return null; }
    var interval = wilsonAt(share, share * (1 - share) / variance);
    return [value, interval[0], interval[1], residual, weight];
  }

  function labelsForHalfWidth(variance, population, halfWidth) {  // reviewed.labels_for_half_width
    if (variance <= 0) { return 1; }
    var needed = 1 / (halfWidth * halfWidth / (Z95 * Z95 * variance) + 1 / population);
    return Math.min(population, Math.ceil(needed - 1e-9));
  }

  function reviewedRate(labels, labelledPredictions, allPredictions) {
    var n = labels.length;
    var population = allPredictions.length;
    var positives = labels.filter(Boolean).length;
    var alone = labelsOnly(positives, n, population);
    var share = n ? positives / n : 0;
    function result(value, low, high, method, residual, weight) {
      var labelsFor = {};
      HALF_WIDTHS.forEach(function (h) {  // reviewed.labels_needed
        labelsFor[h.toFixed(2)] = population <= 0 ? null :
          (n >= population ? population : labelsForHalfWidth(residual, population, h));
      });
      return {
        value: value, low: low, high: high, labels: n, population: population, method: method,
        residualVariance: residual, judgeWeight: weight, labelsFor: labelsFor
      };
    }
    function byLabels(method) {
      return result(share, alone[0], alone[1], method || "labels (Wilson, finite population)",
        n >= population ? 0 : labelsVariance(positives, n), null);
    }
    if (n === 0) { return result(0, 0, 1, "no labels", 0.25, null); }
    if (n >= population) { return byLabels("labels (all reviewed)"); }
    if (n < MIN_FOR_JUDGE || positives === 0 || positives === n) { return byLabels(); }
    var y = labels.map(function (v) { return v ? 1 : 0; });
    var found = difference(y, labelledPredictions, allPredictions);
    if (found === null || found[2] - found[1] >= alone[1] - alone[0]) { return byLabels(); }
    return result(Math.min(1, Math.max(0, found[0])), found[1], found[2], "difference (finite population)", found[3], found[4]);
  }
  // --- end of the reviewed_rate port ---

  function percent(x, digits) {
    var text = (x * 100).toFixed(digits);
    return digits && /\.0+$/.test(text) ? text.replace(/\.0+$/, "") : text;
  }

  function showRate(run) {
    if (!run.rate) { return; }
    if (!run.population) {
      run.rate.textContent = "provisional: no judge verdicts in this run to compute it with";
      return;
    }
    var labels = [];
    var predictions = [];
    run.items.forEach(function (item) {
      var mark = run.marks.get(item.id);
      if (labelled(run, item) && typeof item.data.flagged === "boolean") {
        labels.push(mark.hallucinated);
        predictions.push(item.data.flagged ? 1 : 0);
      }
    });
    var everyone = [];
    for (var k = 0; k < run.population; k += 1) { everyone.push(k < run.flagged ? 1 : 0); }
    var rate = reviewedRate(labels, predictions, everyone);
    ["value", "low", "high", "labels", "method"].forEach(function (key) {
      run.rate.dataset[key] = String(rate[key]);
    });
    if (!rate.labels) {
      run.rate.textContent = "provisional: no labels yet";
      return;
    }
    var bound = function (x) { return percent(x, x < 0.1 && x > 0 ? 1 : 0); };
    run.rate.textContent = "provisional: " + percent(rate.value, 1) + " % (" + bound(rate.low) + "-" +
      bound(rate.high) + " %), " + rate.labels + " label" + (rate.labels === 1 ? "" : "s") + ", " + rate.method;
  }

  function counts() {
    var all = 0;
    state.forEach(function (run) {
      var done = run.items.filter(function (item) { return labelled(run, item); }).length;
      all += done;
      run.progress.textContent = done + " of " + run.items.length + " reviewed";
      showRate(run);
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

  // the next answer with no yes/no after the current one, wrapping around; -1 when none
  function nextUnlabelled() {
    for (var step = 1; step <= items.length; step += 1) {
      var index = (current + step) % items.length;
      if (!labelled(state[items[index].run], items[index])) { return index; }
    }
    return -1;
  }

  function utcNow() { return new Date().toISOString().replace(/\.\d+Z$/, "Z"); }

  function setAnswer(item, value, toggle) {
    if (!signed()) { return; }
    var mark = markOf(item);
    mark.hallucinated = toggle && mark.hallucinated === value ? null : value;
    mark.reviewer = mark.hallucinated === null ? "" : reviewer();
    mark.labelledAt = mark.hallucinated === null ? "" : utcNow();
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
        if (!signed()) { return; }
        var claim = Number(button.closest("li.review-claim").dataset.claim);
        var mark = markOf(item);
        var right = button.dataset.judge === "right";
        if (mark.claims.get(claim) === right) { mark.claims.delete(claim); } else { mark.claims.set(claim, right); }
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
    } else if (key === "u" && items.length) {
      var next = nextUnlabelled();
      if (next >= 0) { select(next, true); } else { message.textContent = "Every drawn answer is marked."; }
    } else if ((key === "y" || key === "n") && items.length) {
      if (current < 0) { select(0, true); }
      setAnswer(items[current], key === "y", false);
    } else {
      return;
    }
    event.preventDefault();
  });

  // character spans of the claims the reviewer holds hallucinated: the judge flagged it and
  // is right, or passed it and is wrong
  function spansOf(item, mark) {
    var seen = new Set();
    var spans = [];
    (Array.isArray(item.data.claims) ? item.data.claims : []).forEach(function (claim) {
      var right = mark.claims.get(claim.index);
      if (!Array.isArray(claim.span) || typeof right !== "boolean" || right !== claim.flagged) { return; }
      var key = claim.span[0] + ":" + claim.span[1];
      if (seen.has(key)) { return; }
      seen.add(key);
      spans.push({ start: claim.span[0], end: claim.span[1] });
    });
    return spans.sort(function (a, b) { return a.start - b.start || a.end - b.end; });
  }

  function labels() {
    var lines = [];
    state.forEach(function (run) {
      run.items.forEach(function (item) {
        if (!labelled(run, item)) { return; }
        var mark = run.marks.get(item.id);
        var data = item.data;
        var label = { id: item.id, pipeline: run.pipeline, fingerprint: run.fingerprint, hallucinated: mark.hallucinated };
        var claims = Array.from(mark.claims.keys()).sort(function (a, b) { return a - b; });
        if (claims.length) {
          label.claims = claims.map(function (k) { return { index: k, judge_right: mark.claims.get(k) }; });
        }
        if (mark.note.trim()) { label.note = mark.note.trim(); }
        label.reviewer = mark.reviewer;
        label.labelled_at = mark.labelledAt;
        label.question = typeof data.question === "string" ? data.question : "";
        label.answer = typeof data.answer === "string" ? data.answer : "";
        label.contexts = Array.isArray(data.contexts) ? data.contexts : [];
        label.source_id = typeof data.source_id === "string" ? data.source_id : item.id;
        label.spans = mark.hallucinated ? spansOf(item, mark) : [];
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
