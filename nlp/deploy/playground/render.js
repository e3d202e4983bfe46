// The result renderers: a table of {name, matches(result, ctx), draw(result, ctx)}, tried in
// order; the first whose `matches` accepts the answer's shape draws it. A task plugs in by the
// shape of its answer, not by its name: a new shape is one new entry (before "json", the
// catch-all). `ctx` is what was sent: {route, text (the main text field), inputs (every input
// field by name), params}.
//
// Offsets in answers are character (code point) offsets into the text sent, as Python counts
// them; JavaScript strings count UTF-16 units, so texts are indexed through Array.from.
"use strict";

const NlpRender = (() => {
  const {el} = Nlp;

  const isObj = (x) => x !== null && typeof x === "object" && !Array.isArray(x);
  const isInt = (x) => Number.isInteger(x);
  const isNum = (x) => typeof x === "number" && Number.isFinite(x);
  const isStr = (x) => typeof x === "string";
  const listOf = (x, test) => Array.isArray(x) && x.length > 0 && x.every(test);
  const hasOffsets = (x) => isObj(x) && isInt(x.start) && isInt(x.end);
  const fmt = (x) => (isNum(x) ? x.toFixed(3) : String(x));

  // A stable colour per label (hue from the label's characters), set through the CSSOM
  function hue(label) {
    let h = 0;
    for (const c of String(label)) h = (h * 31 + c.codePointAt(0)) % 360;
    return h;
  }
  const tint = (label) => ({backgroundColor: `hsl(${hue(label)} 80% 85%)`, borderColor: `hsl(${hue(label)} 60% 45%)`});

  // ---------------------------------------------------------------- building blocks

  // Labelled bars: rows of [label, score]; a score in [0, 1] fills that share of the bar
  function bars(rows, caption) {
    const top = Math.max(1e-9, ...rows.map(([, s]) => Math.abs(s)));
    const scale = rows.every(([, s]) => s >= 0 && s <= 1) ? 1 : top;
    return el("div", {class: "bars"}, caption ? el("div", {class: "caption", text: caption}) : null,
      rows.map(([label, score]) => el("div", {class: "bar-row", "data-label": label, "data-score": score},
        el("span", {class: "bar-label", text: label, title: label}),
        el("span", {class: "bar-track"},
           el("span", {class: "bar-fill", style: {width: `${Math.max(0, Math.min(100, 100 * Math.abs(score) / scale))}%`}})),
        el("span", {class: "bar-value", text: fmt(score)}))));
  }

  // The text with spans [{start, end, label}] marked; overlapping or out-of-range spans are
  // listed as skipped instead of drawn wrong
  function marked(text, spans) {
    const chars = Array.from(text || "");
    const sorted = spans.slice().sort((a, b) => a.start - b.start || b.end - a.end);
    const parts = [];
    const skipped = [];
    let at = 0;
    for (const span of sorted) {
      if (!(span.start >= at && span.end > span.start && span.end <= chars.length)) {
        skipped.push(span);
        continue;
      }
      if (span.start > at) parts.push(chars.slice(at, span.start).join(""));
      const mark = el("mark", {class: "span", "data-start": span.start, "data-end": span.end, "data-label": span.label,
                               style: tint(span.label), title: span.title || span.label},
        el("span", {class: "span-text", text: chars.slice(span.start, span.end).join("")}),
        el("span", {class: "span-label", text: span.label}));
      parts.push(mark);
      at = span.end;
    }
    if (at < chars.length) parts.push(chars.slice(at).join(""));
    return el("div", {class: "marked"}, el("p", {class: "marked-text"}, parts),
      skipped.length ? el("p", {class: "warning", text: `${skipped.length} span(s) overlap or fall outside the text: ` +
                                                        skipped.map((s) => `${s.label} ${s.start}-${s.end}`).join(", ")}) : null);
  }

  // Words in a row, each with its tag (or none) under it
  function words(items, tagOf) {
    return el("div", {class: "words"}, items.map((w, i) => el("span",
      {class: `word ${i % 2 ? "odd" : "even"}`, "data-start": w.start, "data-end": w.end, "data-tag": tagOf(w) ?? undefined},
      el("span", {class: "word-text", text: w.word}),
      tagOf(w) != null ? el("span", {class: "word-tag", text: tagOf(w)}) : null)));
  }

  const legend = (labels) => el("div", {class: "legend"},
    [...new Set(labels)].map((l) => el("span", {class: "legend-item", style: tint(l), text: l})));

  // ---------------------------------------------------------------- the table

  const renderers = [
    { // text classification: [{label, score}], best first
      name: "labels",
      matches: (r) => listOf(r, (x) => isObj(x) && isStr(x.label) && isNum(x.score)),
      draw: (r) => bars(r.map((x) => [x.label, x.score])),
    },
    { // zero-shot classification: {labels: [...], scores: [...]} (transformers' shape)
      name: "zero-shot",
      matches: (r) => isObj(r) && listOf(r.labels, isStr) && listOf(r.scores, isNum) && r.labels.length === r.scores.length,
      draw: (r) => bars(r.labels.map((l, i) => [l, r.scores[i]]), r.sequence),
    },
    { // lexical analysis: {words: [{word, start, end, pos}], entities: [{type, text, start, end}]}
      name: "lexical",
      matches: (r) => isObj(r) && Array.isArray(r.words) && r.words.every(hasOffsets),
      draw: (r, ctx) => el("div", {},
        el("h3", {text: "Words and parts of speech"}), words(r.words, (w) => w.pos),
        el("h3", {text: "Entities"}),
        (r.entities || []).length
          ? [marked(ctx.text, r.entities.map((e) => ({start: e.start, end: e.end, label: e.type}))),
             legend(r.entities.map((e) => e.type))]
          : el("p", {class: "muted", text: "no entities"})),
    },
    { // POS tagging: [{word, start, end, pos}]
      name: "tagged-words",
      matches: (r) => listOf(r, (x) => hasOffsets(x) && isStr(x.word) && isStr(x.pos)),
      draw: (r) => words(r, (w) => w.pos),
    },
    { // word segmentation: [{word, start, end}]
      name: "words",
      matches: (r) => listOf(r, (x) => hasOffsets(x) && isStr(x.word) && !("pos" in x) && !("entity_group" in x)),
      draw: (r) => words(r, () => null),
    },
    { // NER and any labelled spans: [{entity_group | type | label, start, end, score?}]
      name: "spans",
      matches: (r) => listOf(r, (x) => hasOffsets(x) && isStr(x.entity_group ?? x.type ?? x.label)),
      draw: (r, ctx) => {
        const spans = r.map((x) => ({start: x.start, end: x.end, label: x.entity_group ?? x.type ?? x.label,
                                     title: isNum(x.score) ? `${x.entity_group ?? x.type ?? x.label} ${fmt(x.score)}` : null}));
        return el("div", {}, marked(ctx.text, spans), legend(spans.map((s) => s.label)));
      },
    },
    { // information extraction: [{type: [{text, start, end, probability}]}] or that object alone
      name: "extraction",
      matches: (r) => {
        const one = Array.isArray(r) && r.length === 1 ? r[0] : r;
        return isObj(one) && Object.keys(one).length > 0 &&
               Object.values(one).every((v) => listOf(v, (x) => hasOffsets(x) && isStr(x.text)));
      },
      draw: (r, ctx) => {
        const one = Array.isArray(r) ? r[0] : r;
        const spans = Object.entries(one).flatMap(([type, found]) => found.map((x) => ({start: x.start, end: x.end, label: type,
          title: isNum(x.probability) ? `${type} ${fmt(x.probability)}` : type})));
        return el("div", {}, marked(ctx.text, spans), legend(spans.map((s) => s.label)));
      },
    },
    { // extractive QA: {answer, start, end, score}, or a list of them (top_k > 1), offsets into the context
      name: "answer",
      matches: (r) => hasOffsets(r) && isStr(r.answer) || listOf(r, (x) => hasOffsets(x) && isStr(x.answer)),
      draw: (r, ctx) => {
        const answers = Array.isArray(r) ? r : [r];
        const context = ctx.inputs.context ?? ctx.text;
        const label = (i) => (answers.length > 1 ? `answer ${i + 1}` : "answer");
        return el("div", {}, answers.map((a, i) => el("p", {class: "answer"}, `${label(i)}: `,
                                         el("strong", {class: "answer-text", text: a.answer}),
                                         isNum(a.score) ? el("span", {class: "muted", text: ` (score ${fmt(a.score)})`}) : null)),
                  marked(context, answers.map((a, i) => ({start: a.start, end: a.end, label: label(i)}))));
      },
    },
    { // text correction: {source, target, errors: [{position, correction: {wrong: right}}]}
      name: "corrections",
      matches: (r) => {
        const one = Array.isArray(r) && r.length === 1 ? r[0] : r;
        return isObj(one) && isStr(one.source) && isStr(one.target) && Array.isArray(one.errors) &&
               one.errors.every((e) => isObj(e) && isInt(e.position) && isObj(e.correction));
      },
      draw: (r) => {
        const one = Array.isArray(r) ? r[0] : r;
        const chars = Array.from(one.source);
        const fixes = new Map();
        for (const e of one.errors) {
          for (const [wrong, right] of Object.entries(e.correction)) fixes.set(e.position, {wrong, right: String(right)});
        }
        const parts = [];
        for (let i = 0; i < chars.length;) {
          const fix = fixes.get(i);
          if (!fix) { parts.push(chars[i]); i += 1; continue; }
          const n = Math.max(1, Array.from(fix.wrong).length);
          parts.push(el("span", {class: "correction", "data-position": i},
            el("del", {text: chars.slice(i, i + n).join("")}), el("ins", {text: fix.right})));
          i += n;
        }
        return el("div", {}, el("p", {class: "corrected"}, parts),
                  el("p", {class: "muted"}, "Corrected: ", el("span", {class: "target", text: one.target})));
      },
    },
    { // sentence similarity: one score per sentence sent ([float]) against a list input
      name: "similarity",
      matches: (r, ctx) => listOf(r, isNum) && Array.isArray(ctx.inputs.sentences) && ctx.inputs.sentences.length === r.length,
      draw: (r, ctx) => bars(ctx.inputs.sentences.map((s, i) => [s, r[i]]),
                             ctx.inputs.source_sentence ? `similarity to “${ctx.inputs.source_sentence}”` : null),
    },
    { // sentence vectors: [float] or [[float], ...]
      name: "vectors",
      matches: (r) => listOf(r, isNum) || listOf(r, (v) => listOf(v, isNum)),
      draw: (r) => el("div", {}, (r.every(isNum) ? [r] : r).map((v) => {
        const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
        return el("p", {class: "vector", "data-dims": v.length},
          el("strong", {text: `${v.length} dimensions`}), `, norm ${fmt(norm)}: `,
          el("code", {text: `[${v.slice(0, 8).map((x) => x.toFixed(4)).join(", ")}${v.length > 8 ? ", …" : ""}]`}));
      })),
    },
    { // an empty list: nothing found (no entities, no labels above a threshold)
      name: "empty",
      matches: (r) => Array.isArray(r) && r.length === 0,
      draw: (r, ctx) => el("div", {}, el("p", {class: "muted", text: "nothing found in:"}), el("p", {class: "marked-text", text: ctx.text})),
    },
    { // anything else: the JSON itself, as text
      name: "json",
      matches: () => true,
      draw: (r) => el("pre", {class: "json", text: JSON.stringify(r, null, 2)}),
    },
  ];

  // The answer drawn by the first renderer that accepts its shape
  function render(result, ctx) {
    const full = {route: "/predict", text: "", inputs: {}, params: {}, ...ctx};
    const renderer = renderers.find((r) => r.matches(result, full));
    const node = renderer.draw(result, full);
    node.dataset.renderer = renderer.name;
    node.classList.add("rendered");
    return node;
  }

  return {renderers, render, marked, bars, words};
})();
