(function () {
  "use strict";
  // People's review of the sampled answers: marks kept in localStorage per run fingerprint,
  // reviewer and role, exported as labels.jsonl (auditor report --labels, check --examples,
  // calibrate --labels). Roles: the first review (every drawn answer), the blind second
  // review (only the answers drawn for it; no other reviewer's marks are ever loaded) and the
  // adjudicator (the answers where the first and second reviewers' files, read here from
  // local files, disagree). Reads only data- attributes, JSON.parse of the report's
  // application/json blocks and of the chosen files, and writes only textContent: nothing from
  // a model, a document or a labels file is ever parsed as HTML.
  var runs = Array.prototype.slice.call(document.querySelectorAll("section.review-run"));
  var download = document.getElementById("review-download");
  if (!runs.length || !download) { return; }
  var total = document.getElementById("review-total");
  var storageNote = document.getElementById("review-storage");
  var reviewerInput = document.getElementById("review-reviewer");
  var message = document.getElementById("review-message");
  var roleSelect = document.getElementById("review-role");
  var roleNote = document.getElementById("review-role-note");
  var adjudicateBar = document.getElementById("review-adjudicate");
  var filesInput = document.getElementById("review-adjudicate-files");
  var adjudicateSummary = document.getElementById("review-adjudicate-summary");
  var PREFIX = "auditor-review:";
  var REVIEWER_KEY = PREFIX + "reviewer";
  var ROLE_KEY = PREFIX + "role";
  // each role: what a line's "role" says, the file it downloads as, what the page shows
  var ROLES = {
    first: { file: "labels.jsonl", note: "First review: every drawn answer, in the order drawn." },
    second: {
      file: "labels-second.jsonl",
      note: "Second review, blind: only the answers drawn for a second review, in the order drawn; no other reviewer's marks are shown. Download your labels as your own file."
    },
    adjudicator: {
      file: "labels-adjudicator.jsonl",
      note: "Adjudicate: load the first and second reviewers' files; the answers they disagree on are listed with both labels. Your label settles each."
    }
  };
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

  // one reviewer's marks in one role on one run: the second never loads the first's
  function storeKey(fingerprint, role, name) { return PREFIX + JSON.stringify([fingerprint, role, name]); }

  var older = false;
  // the marks kept under `key`; `name` set: only those that reviewer made (the page kept
  // every reviewer's first-review marks under the run's fingerprint alone before roles)
  function read(key, name) {
    var marks = new Map();
    var saved = JSON.parse(store.getItem(key) || "null");
    if (saved && saved.version === VERSION && Array.isArray(saved.answers)) {
      saved.answers.forEach(function (entry) {
        if (Array.isArray(entry) && typeof entry[0] === "string" && entry[1] && typeof entry[1] === "object") {
          var mark = readMark(entry[1]);
          if (name === undefined || mark.reviewer === name) { marks.set(entry[0], mark); }
        }
      });
    } else if (saved) {
      older = true;  // another version's marks: not read (they are overwritten on a mark)
    }
    return saved ? marks : null;
  }

  function load(fingerprint, role, name) {
    if (!store) { return new Map(); }
    try {
      var marks = read(storeKey(fingerprint, role, name));
      var earlier = role === "first" ? read(PREFIX + fingerprint, name) : null;
      return marks || earlier || new Map();
    } catch (err) {
      return new Map();
    }
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
      scores: Array.isArray(judge.scores) ? judge.scores.filter(function (v) { return typeof v === "number"; }) : [],
      checkFingerprint: section.dataset.checkFingerprint || "",
      secondReview: section.dataset.secondReview === "true",
      rateLine: section.querySelector(".review-rate"),
      roleNone: section.querySelector(".review-role-none"),
      items: [],
      marks: new Map(),
      // the first and second reviewers' labels loaded to adjudicate: id -> what each said
      loaded: { first: new Map(), second: new Map() }
    };
    section.querySelectorAll("article.review-item").forEach(function (article) {
      var data = parsed(article.querySelector("script.review-data"), {});
      var item = {
        run: runIndex,
        article: article,
        id: article.dataset.id,
        data: data,
        second: article.dataset.second === "true",
        both: article.querySelector(".review-both")
      };
      run.items.push(item);
      items.push(item);
    });
    return run;
  });

  if (reviewerInput && store) {
    try { reviewerInput.value = store.getItem(REVIEWER_KEY) || ""; } catch (err) { reviewerInput.value = ""; }
  }
  if (roleSelect && store) {
    try {
      var keptRole = store.getItem(ROLE_KEY);
      if (keptRole && Object.prototype.hasOwnProperty.call(ROLES, keptRole)) { roleSelect.value = keptRole; }
    } catch (err) { /* the first review */ }
  }
  function reviewer() { return reviewerInput ? reviewerInput.value.trim() : ""; }
  function role() {
    var value = roleSelect ? roleSelect.value : "first";
    return Object.prototype.hasOwnProperty.call(ROLES, value) ? value : "first";
  }
  if (reviewerInput) {
    reviewerInput.addEventListener("input", function () {
      if (store) {
        try { store.setItem(REVIEWER_KEY, reviewerInput.value); } catch (err) { /* kept in the page */ }
      }
      if (reviewer()) { message.textContent = ""; }
      reload();
    });
  }
  if (roleSelect) {
    roleSelect.addEventListener("change", function () {
      if (store) {
        try { store.setItem(ROLE_KEY, role()); } catch (err) { /* kept in the page */ }
      }
      message.textContent = "";
      reload();
    });
  }
  // a name as people read it (as `auditor.labels.same_person`): NFKC, case aside, one space
  function person(name) {
    return String(name || "").normalize("NFKC").toLowerCase().split(/\s+/).filter(Boolean).join(" ");
  }

  // the review of `item`'s dispute the adjudicator named made ("first", "second"), else ""
  function ownReview(item) {
    var both = item ? disagreement(item) : null;
    var me = person(reviewer());
    if (!both || !me) { return ""; }
    if (person(both.first.reviewer) === me) { return "first"; }
    return person(both.second.reviewer) === me ? "second" : "";
  }

  // a mark needs a name: each label says who made it; an adjudicator settles other people's
  // disagreement, never their own (`report --labels` refuses it)
  function signed(item) {
    if (reviewer()) {
      var own = role() === "adjudicator" ? ownReview(item) : "";
      message.textContent = own
        ? "You made the " + own + " review of this answer: nobody adjudicates their own disagreement; another person settles it."
        : "";
      return !own;
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
      store.setItem(storeKey(run.fingerprint, role(), reviewer()), JSON.stringify({ version: VERSION, answers: answers }));
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
    var gap = false;  // only the drawn order's labelled prefix makes a rate, as in report
    run.items.forEach(function (item) {
      var mark = run.marks.get(item.id);
      if (!labelled(run, item)) { gap = true; }
      if (!gap && typeof item.data.score === "number") {
        labels.push(mark.hallucinated);
        predictions.push(item.data.score);  // the judge's score, as review_summary leans on it
      }
    });
    var everyone = run.scores;
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

  // the answer's first and second labels where the loaded files disagree on it, else null
  function disagreement(item) {
    var loaded = state[item.run].loaded;
    var first = loaded.first.get(item.id);
    var second = loaded.second.get(item.id);
    return first && second && first.hallucinated !== second.hallucinated ? { first: first, second: second } : null;
  }

  // shown in the role chosen: the first review every drawn answer, the second only those
  // drawn for it, the adjudicator those the loaded reviews disagree on
  function eligible(item) {
    var now = role();
    if (now === "second") { return item.second; }
    if (now === "adjudicator") { return disagreement(item) !== null; }
    return true;
  }

  // downloaded in the role chosen (a second review only of the answers drawn for it)
  function exported(run, item) {
    return labelled(run, item) && (role() !== "second" || item.second);
  }

  function counts() {
    var all = 0;
    state.forEach(function (run) {
      var shown = run.items.filter(eligible);
      var done = shown.filter(function (item) { return labelled(run, item); }).length;
      all += run.items.filter(function (item) { return exported(run, item); }).length;
      run.progress.textContent = done + " of " + shown.length + " reviewed";
      showRate(run);
    });
    total.textContent = all + " label" + (all === 1 ? "" : "s") + " to download";
    download.disabled = all === 0;
  }

  function said(hallucinated) { return hallucinated ? "hallucinated" : "not hallucinated"; }

  // both reviewers' labels of a disputed answer, as text
  function showBoth(item, found) {
    var box = item.both;
    if (!box) { return; }
    box.textContent = "";
    box.hidden = !found;
    if (!found) { return; }
    [["First review", found.first], ["Second review", found.second]].forEach(function (pair) {
      var line = document.createElement("p");
      var head = document.createElement("strong");
      head.textContent = pair[0] + " (" + (pair[1].reviewer || "unnamed") + "): ";
      line.appendChild(head);
      line.appendChild(document.createTextNode(said(pair[1].hallucinated) + (pair[1].note ? ". Note: " + pair[1].note : "")));
      line.className = "review-both-" + (pair[0] === "First review" ? "first" : "second");
      box.appendChild(line);
    });
  }

  // the answers of the role chosen shown, the others hidden; what each run has for the role
  function arrange() {
    var now = role();
    if (roleNote) { roleNote.textContent = ROLES[now].note; }
    if (adjudicateBar) { adjudicateBar.hidden = now !== "adjudicator"; }
    var anyLoaded = state.some(function (run) { return run.loaded.first.size || run.loaded.second.size; });
    state.forEach(function (run) {
      var shown = 0;
      run.items.forEach(function (item) {
        var on = eligible(item);
        item.article.hidden = !on;
        if (on) { shown += 1; }
        showBoth(item, now === "adjudicator" ? disagreement(item) : null);
      });
      // the provisional rate is the first review's (a second review's labels count in no rate)
      if (run.rateLine) { run.rateLine.hidden = now !== "first"; }
      var none = "";
      if (now === "second" && !run.secondReview) {
        none = "No answers of this run were drawn for a second review: auditor review RUN_DIR --sample N --second-review 0.2, then report again.";
      } else if (now === "adjudicator" && !anyLoaded) {
        none = "Load the first and second reviewers' labels files above: the answers they disagree on are listed here.";
      } else if (now === "adjudicator" && !shown) {
        none = "No answer of this run on which the loaded first and second reviews disagree.";
      }
      if (run.roleNone) {
        run.roleNone.textContent = none;
        run.roleNone.hidden = !none;
      }
    });
    if (current >= 0 && items[current].article.hidden) {
      items[current].article.classList.remove("current");
      current = -1;
    }
  }

  // the marks of the reviewer named in the role chosen (another reviewer's never load)
  function reload() {
    state.forEach(function (run) { run.marks = load(run.fingerprint, role(), reviewer()); });
    if (older) { storageNote.textContent = "(marks kept by an older version of this page are not read)"; }
    items.forEach(show);
    arrange();
    counts();
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

  // the nearest answer shown from `from` in `direction` (1 or -1); -1 when none
  function nearest(from, direction) {
    for (var index = from; index >= 0 && index < items.length; index += direction) {
      if (!items[index].article.hidden) { return index; }
    }
    return -1;
  }

  // the next answer shown with no yes/no after the current one, wrapping around; -1 when none
  function nextUnlabelled() {
    for (var step = 1; step <= items.length; step += 1) {
      var index = (current + step) % items.length;
      if (!items[index].article.hidden && !labelled(state[items[index].run], items[index])) { return index; }
    }
    return -1;
  }

  function utcNow() { return new Date().toISOString().replace(/\.\d+Z$/, "Z"); }

  function setAnswer(item, value, toggle) {
    if (!signed(item)) { return; }
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
        if (!signed(item)) { return; }
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
      select(nearest(current + 1, 1), true);
    } else if (key === "k") {
      select(current < 0 ? nearest(0, 1) : nearest(current - 1, -1), true);
    } else if (key === "u" && items.length) {
      var next = nextUnlabelled();
      if (next >= 0) { select(next, true); } else { message.textContent = "Every answer shown is marked."; }
    } else if (key === "y" || key === "n") {
      if (current < 0) { select(nearest(0, 1), true); }
      if (current < 0) { return; }  // no answer shown in this role
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
    var now = role();
    state.forEach(function (run) {
      run.items.forEach(function (item) {
        if (!exported(run, item)) { return; }
        var mark = run.marks.get(item.id);
        var data = item.data;
        var label = {
          id: item.id,
          pipeline: run.pipeline,
          fingerprint: run.fingerprint,
          check_fingerprint: run.checkFingerprint || null,
          role: now,
          hallucinated: mark.hallucinated
        };
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
    var name = ROLES[role()].file;
    var url = URL.createObjectURL(new Blob(lines, { type: "application/x-ndjson" }));
    var link = document.createElement("a");
    link.href = url;
    link.download = name;
    link.hidden = true;
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 60000);
    total.textContent = lines.length + " label" + (lines.length === 1 ? "" : "s") + " saved as " + name;
  });

  // --- adjudication: the first and second reviewers' files, read in this browser ----------
  function runOf(label) {
    if (typeof label.pipeline === "string") {
      return state.find(function (run) { return run.pipeline === label.pipeline; }) || null;
    }
    return state.length === 1 ? state[0] : null;
  }

  // one line of a labels file into its run's loaded labels; a reason when it is not taken
  function take(label, where, counted) {
    if (!label || typeof label !== "object" || Array.isArray(label)) { return where + ": not a label"; }
    var ident = typeof label.id === "number" ? String(label.id) : label.id;
    if (typeof ident !== "string" || typeof label.hallucinated !== "boolean") {
      return where + ": no id and hallucinated";
    }
    var kind = label.role === undefined || label.role === null ? "first" : label.role;
    if (kind === "adjudicator") {
      counted.adjudicator += 1;
      return null;
    }
    if (kind !== "first" && kind !== "second") { return where + ": role is not first, second or adjudicator"; }
    var run = runOf(label);
    if (!run) { return where + ": pipeline not in this report"; }
    if (typeof label.fingerprint === "string" && label.fingerprint !== run.fingerprint) {
      return where + ": labelled on another run's page";
    }
    if (!run.items.some(function (item) { return item.id === ident; })) {
      return where + ": answer not among " + run.pipeline + "'s drawn answers";
    }
    if (typeof label.check_fingerprint === "string" && run.checkFingerprint && label.check_fingerprint !== run.checkFingerprint) {
      counted.otherCheck += 1;
    }
    var entry = {
      hallucinated: label.hallucinated,
      reviewer: typeof label.reviewer === "string" ? label.reviewer : "",
      note: typeof label.note === "string" ? label.note : "",
      where: where
    };
    var earlier = run.loaded[kind].get(ident);
    if (earlier && earlier.hallucinated !== entry.hallucinated) {
      return where + ": answer " + ident + " labelled differently in the " + kind + " review at " + earlier.where + " (the first kept)";
    }
    if (!earlier) { run.loaded[kind].set(ident, entry); }
    counted[kind] += 1;
    return null;
  }

  function describeLoaded(counted, problems) {
    var pairs = 0;
    var apart = 0;
    var names = { first: new Set(), second: new Set() };
    state.forEach(function (run) {
      ["first", "second"].forEach(function (kind) {
        run.loaded[kind].forEach(function (entry) { names[kind].add(entry.reviewer || "unnamed"); });
      });
      run.loaded.second.forEach(function (entry, ident) {
        var first = run.loaded.first.get(ident);
        if (first) {
          pairs += 1;
          if (first.hallucinated !== entry.hallucinated) { apart += 1; }
        }
      });
    });
    var list = function (set) { return Array.from(set).sort().join(", ") || "nobody yet"; };
    var text = "Loaded: first review by " + list(names.first) + ", second review by " + list(names.second) +
      "; " + pairs + " answer" + (pairs === 1 ? "" : "s") + " reviewed by both, " + apart + " disagree" +
      (apart === 1 ? "s" : "") + ".";
    if (counted.adjudicator) { text += " " + counted.adjudicator + " earlier adjudication line(s) not loaded."; }
    if (counted.otherCheck) { text += " " + counted.otherCheck + " label(s) made on another check of this run."; }
    if (problems.length) {
      text += " " + problems.length + " line(s) skipped: " + problems.slice(0, 3).join("; ") + (problems.length > 3 ? "; ..." : "") + ".";
    }
    adjudicateSummary.textContent = text;
  }

  if (filesInput) {
    filesInput.addEventListener("change", function () {
      var chosen = Array.prototype.slice.call(filesInput.files || []);
      if (!chosen.length) { return; }
      Promise.all(chosen.map(function (file) {
        return file.text().then(function (text) { return { name: file.name, text: text }; });
      })).then(function (read) {
        var counted = { first: 0, second: 0, adjudicator: 0, otherCheck: 0 };
        var problems = [];
        read.forEach(function (file) {
          file.text.split(/\r?\n/).forEach(function (line, k) {
            if (!line.trim()) { return; }
            var where = file.name + ":" + (k + 1);
            var label;
            try {
              label = JSON.parse(line);
            } catch (err) {
              problems.push(where + ": not JSON");
              return;
            }
            var problem = take(label, where, counted);
            if (problem) { problems.push(problem); }
          });
        });
        filesInput.value = "";
        describeLoaded(counted, problems);
        arrange();
        counts();
      }, function () {
        adjudicateSummary.textContent = "Could not read the chosen files.";
      });
    });
  }

  reload();
  var first = nearest(0, 1);
  if (first >= 0) { select(first, false); }
})();
