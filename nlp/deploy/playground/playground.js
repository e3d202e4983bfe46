// The playground: a form built from this server's OpenAPI document (each POST route's request
// schema gives the input fields and the options), posted to the route as any client would, and
// the answer drawn by NlpRender. It reads nothing but /openapi.json, /info and the POST routes.
"use strict";

(() => {
  const {el, call, errorMessage, deref} = Nlp;
  const $ = (id) => document.getElementById(id);
  const state = {doc: null, route: null, fields: [], options: []};

  // ---------------------------------------------------------------- the served model

  async function describe() {
    try {
      await showInfo();
    } catch (err) {
      $("model-line").textContent = `could not ask /info: ${err.message}`;
    } finally {  // tests (and anything waiting on the page) see that an answer came
      document.body.dataset.described = String(Number(document.body.dataset.described || 0) + 1);
    }
  }

  async function showInfo() {
    const info = await call("GET", "/info");
    const line = $("model-line");
    if (info.status === 401) {
      line.textContent = "This server needs a bearer token: enter it below.";
      $("token-state").textContent = Nlp.token() ? "The token in use was refused." : "No token in use.";
      document.body.dataset.auth = "needed";
      return;
    }
    document.body.dataset.auth = "ok";
    $("token-state").textContent = Nlp.token() ? "Token in use (kept for this tab only)." : "";
    if (!info.ok) { line.textContent = `/info answered ${info.status}: ${errorMessage(info)}`; return; }
    const i = info.body;
    line.replaceChildren(el("strong", {id: "task", text: i.task ?? "?"}), " · ", el("span", {id: "model", text: i.model ?? "?"}),
      el("span", {class: "muted", text: ` · ${i.backend ?? "?"} ${i.precision ?? ""} on ${i.device ?? "?"} · status ${i.status}`}));
  }

  // ---------------------------------------------------------------- the form, from the schema

  function postRoutes(doc) {
    return Object.entries(doc.paths || {}).filter(([, ops]) => ops.post).map(([path, ops]) => [path, ops.post]);
  }

  function requestSchema(op) {
    return deref(state.doc, op.requestBody?.content?.["application/json"]?.schema);
  }

  const isTextList = (s) => s.type === "array" && deref(state.doc, s.items).type === "string";

  // The input fields of `inputs`' schema: one text, or the string fields of an object
  function inputFields(schema) {
    const variants = (schema.oneOf || schema.anyOf || [schema]).map((v) => deref(state.doc, v));
    if (variants.some((v) => v.type === "string")) return [{name: "text", kind: "text", single: true}];
    const object = variants.find((v) => v.type === "object" && v.properties);
    if (object) {
      return Object.entries(object.properties).map(([name, s]) => {
        const sub = deref(state.doc, s);
        return {name, kind: isTextList(sub) ? "lines" : "text"};
      });
    }
    return [{name: "text", kind: "text", single: true}];
  }

  // The options: the properties of `parameters` (sent inside it) and any other top-level field
  function optionList(schema) {
    const props = schema.properties || {};
    const out = [];
    const params = deref(state.doc, props.parameters);
    for (const [name, s] of Object.entries(params.properties || {})) out.push({name, schema: deref(state.doc, s), nested: true});
    for (const [name, s] of Object.entries(props)) {
      if (name !== "inputs" && name !== "parameters") out.push({name, schema: deref(state.doc, s), nested: false});
    }
    return out;
  }

  // A JSON schema type, and whether null is allowed too ({"type": ["integer", "null"]})
  function typeOf(s) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    return {type: types.find((t) => t !== "null"), nullable: types.includes("null")};
  }

  function optionKind(s) {
    const {type} = typeOf(s);
    if (Array.isArray(s.enum)) return "enum";
    if (type === "boolean") return "boolean";
    if (type === "integer" || type === "number") return "number";
    if (isTextList(s)) return "list";
    if (s.type === "object" || s.type === "array") return "json";
    return "any";  // no type declared: JSON when it parses (2, null, [..]), else the text
  }

  function optionHelp(s) {
    const bits = [];
    if (s.description) bits.push(s.description);
    if ("default" in s) bits.push(`default ${JSON.stringify(s.default)}`);
    const bound = bounds(s);
    if (bound) bits.push(bound);
    if (typeOf(s).nullable) bits.push("or null");
    const kind = optionKind(s);
    if (kind === "list") bits.push("comma-separated");
    if (kind === "json" || kind === "any") bits.push("JSON");
    return bits.join("; ");
  }

  function bounds(s) {
    if ("minimum" in s && "maximum" in s) return `${s.minimum} to ${s.maximum}`;
    if ("minimum" in s) return `>= ${s.minimum}`;
    if ("maximum" in s) return `<= ${s.maximum}`;
    return "";
  }

  function optionWidget(opt) {
    const s = opt.schema;
    const id = `opt-${opt.name}`;
    const common = {id, "data-option": opt.name, oninput: () => { opt.dirty = true; }, onchange: () => { opt.dirty = true; }};
    switch (optionKind(s)) {
      case "boolean": return el("input", {...common, type: "checkbox", checked: s.default === true});
      case "number": {
        const placeholder = "default" in s ? JSON.stringify(s.default) : "";
        // a number field cannot hold null: a nullable number is typed as text ("3" or "null")
        return typeOf(s).nullable
          ? el("input", {...common, type: "text", inputMode: "numeric", placeholder})
          : el("input", {...common, type: "number", step: typeOf(s).type === "integer" ? "1" : "any",
                         min: s.minimum, max: s.maximum, placeholder});
      }
      case "enum": return el("select", common, el("option", {value: "", text: "(default)"}),
                             s.enum.map((v) => el("option", {value: JSON.stringify(v), text: String(v)})));
      case "json": return el("textarea", {...common, rows: 3, placeholder: "default" in s ? JSON.stringify(s.default) : "JSON"});
      default: return el("input", {...common, type: "text", placeholder: "default" in s ? JSON.stringify(s.default) : ""});
    }
  }

  function buildForm(path) {
    state.route = path;
    const op = Object.fromEntries(postRoutes(state.doc))[path];
    const schema = requestSchema(op);
    state.fields = inputFields(deref(state.doc, schema.properties?.inputs || {type: "string"}));
    state.options = optionList(schema);
    const previous = $("in-text")?.value;
    $("inputs").replaceChildren(...state.fields.map((f) => el("div", {class: "field"},
      el("label", {htmlFor: `in-${f.name}`, text: f.kind === "lines" ? `${f.name} (one per line)` : f.name}),
      el("textarea", {id: `in-${f.name}`, rows: f.kind === "lines" ? 4 : 3, lang: "zh",
                      placeholder: f.kind === "lines" ? "每行一句" : "输入中文文本…"}))));
    if (previous && $("in-text")) $("in-text").value = previous;
    $("options").replaceChildren(...(state.options.length ? state.options.map((o) => el("div", {class: "field option"},
      el("label", {htmlFor: `opt-${o.name}`, text: o.name}), optionWidget(o),
      el("span", {class: "help muted", text: optionHelp(o.schema)}))) : [el("p", {class: "muted", text: "This route takes no options."})]));
    $("options-box").hidden = state.options.length === 0;
  }

  // ---------------------------------------------------------------- the request

  class FormError extends Error {}

  function optionValue(opt) {
    const node = $(`opt-${opt.name}`);
    const s = opt.schema;
    const raw = node.type === "checkbox" ? null : node.value.trim();
    switch (optionKind(s)) {
      case "boolean": return opt.dirty ? node.checked : undefined;
      case "enum": return raw ? JSON.parse(raw) : undefined;
      case "number": {
        if (!raw) return undefined;
        const {type, nullable} = typeOf(s);
        if (nullable && raw === "null") return null;
        const v = Number(raw);
        const what = (type === "integer" ? "an integer" : "a number") + (nullable ? " or null" : "");
        if (!Number.isFinite(v) || (type === "integer" && !Number.isInteger(v))) {
          throw new FormError(`${opt.name} must be ${what}, got "${raw}"`);
        }
        if (("minimum" in s && v < s.minimum) || ("maximum" in s && v > s.maximum)) {
          const range = "minimum" in s && "maximum" in s ? `between ${s.minimum} and ${s.maximum}` : bounds(s);
          throw new FormError(`${opt.name} must be ${range}, got ${v}`);
        }
        return v;
      }
      case "list": return raw ? raw.split(/[,，\n]/).map((x) => x.trim()).filter(Boolean) : undefined;
      case "json":
        if (!raw) return undefined;
        try { return JSON.parse(raw); } catch (err) { throw new FormError(`${opt.name} is not valid JSON: ${err.message}`); }
      default:
        if (!raw) return undefined;
        try { return JSON.parse(raw); } catch (err) { return raw; }
    }
  }

  function collect() {
    const values = {};
    for (const f of state.fields) {
      const text = $(`in-${f.name}`).value;
      values[f.name] = f.kind === "lines" ? text.split("\n").map((x) => x.trim()).filter(Boolean) : text;
    }
    const [first] = state.fields;
    const inputs = first.single ? values.text : values;
    const payload = {inputs};
    const params = {};
    for (const opt of state.options) {
      const v = optionValue(opt);
      if (v === undefined) continue;
      if (opt.nested) params[opt.name] = v; else payload[opt.name] = v;
    }
    if (Object.keys(params).length) payload.parameters = params;
    const main = first.single ? values.text : (values.context ?? values.text ?? values.source_sentence ?? Object.values(values)[0]);
    return {payload, ctx: {route: state.route, text: typeof main === "string" ? main : "", inputs: values, params}};
  }

  async function run(event) {
    event.preventDefault();
    try {
      await ask();
    } finally {  // tests (and anything waiting on the page) see that this press was answered
      document.body.dataset.runs = String(Number(document.body.dataset.runs || 0) + 1);
    }
  }

  async function ask() {
    const status = $("status");
    let request;
    try {
      request = collect();
    } catch (err) {
      if (!(err instanceof FormError)) throw err;
      status.textContent = err.message;
      status.className = "error";
      return;
    }
    status.textContent = "running…";
    status.className = "muted";
    $("run").disabled = true;
    const started = performance.now();
    try {
      const answer = await call("POST", state.route, request.payload);
      $("raw").textContent = JSON.stringify(answer.body, null, 2);
      if (!answer.ok) {
        status.textContent = `${answer.status}: ${errorMessage(answer)}`;
        status.className = "error";
        $("result").replaceChildren();
        if (answer.status === 401) await describe();
        return;
      }
      status.textContent = `200 in ${Math.round(performance.now() - started)} ms`;
      $("result").replaceChildren(NlpRender.render(answer.body, request.ctx));
    } catch (err) {
      status.textContent = `no answer from the server: ${err.message}`;
      status.className = "error";
    } finally {
      $("run").disabled = false;
    }
  }

  // ---------------------------------------------------------------- start

  async function start() {
    $("token").value = Nlp.token();
    $("token-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      Nlp.setToken($("token").value.trim());
      await describe();
    });
    $("token-clear").addEventListener("click", async () => {
      Nlp.setToken("");
      $("token").value = "";
      await describe();
    });
    $("run-form").addEventListener("submit", run);
    const answer = await call("GET", "/openapi.json");
    if (!answer.ok) {
      $("model-line").textContent = `/openapi.json answered ${answer.status}: ${errorMessage(answer)}; reload when the model has loaded`;
      return;
    }
    state.doc = answer.body;
    const routes = postRoutes(state.doc);
    const wanted = new URLSearchParams(location.search).get("route");
    $("route").replaceChildren(...routes.map(([path, op]) => el("option", {value: path, text: `POST ${path}`, title: op.summary || ""})));
    $("route").value = routes.some(([p]) => p === wanted) ? wanted : routes[0][0];
    $("route").addEventListener("change", () => buildForm($("route").value));
    buildForm($("route").value);
    await describe();
    document.body.dataset.ready = "true";
  }

  start();
})();
