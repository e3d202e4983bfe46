// The API docs page: this server's /openapi.json drawn as a list of operations, each with its
// request schema, responses and whether it needs the bearer token. Text only (textContent).
"use strict";

(() => {
  const {el, call, errorMessage, deref} = Nlp;
  const $ = (id) => document.getElementById(id);
  let doc = null;

  // One schema as a nested list: type, constraints, description; objects list their properties
  function schemaNode(schema, depth = 0) {
    const s = deref(doc, schema);
    if (depth > 8) return el("span", {class: "muted", text: "…"});
    const head = [];
    const ref = schema && schema.$ref ? String(schema.$ref).split("/").pop() : null;
    if (ref) head.push(el("span", {class: "schema-ref", text: ref}), " ");
    if (s.type) head.push(el("span", {class: "schema-type", text: s.type === "array" ? "array of" : s.type}));
    for (const key of ["minimum", "maximum", "default"]) {
      if (key in s) head.push(el("span", {class: "schema-constraint", text: ` ${key} ${JSON.stringify(s[key])}`}));
    }
    if (Array.isArray(s.enum)) head.push(el("span", {class: "schema-constraint", text: ` one of ${s.enum.map((x) => JSON.stringify(x)).join(", ")}`}));
    if (s.description) head.push(el("span", {class: "schema-description", text: ` — ${s.description}`}));
    const body = [];
    const variants = s.oneOf || s.anyOf;
    if (variants) {
      body.push(el("div", {class: "muted", text: "one of:"}),
                el("ul", {}, variants.map((v) => el("li", {}, schemaNode(v, depth + 1)))));
    }
    if (s.type === "array" && s.items) body.push(el("div", {class: "schema-items"}, schemaNode(s.items, depth + 1)));
    if (s.properties) {
      const required = new Set(s.required || []);
      body.push(el("ul", {class: "schema-properties"}, Object.entries(s.properties).map(([name, sub]) =>
        el("li", {"data-property": name}, el("code", {class: "schema-name", text: name}),
           required.has(name) ? el("span", {class: "required", text: " required"}) : null, " ", schemaNode(sub, depth + 1)))));
    }
    if (!head.length && !body.length) head.push(el("span", {class: "muted", text: "any JSON"}));
    return el("div", {class: "schema"}, head, body);
  }

  function operation(path, method, op) {
    const secured = Array.isArray(op.security) && op.security.length > 0;
    const request = op.requestBody?.content?.["application/json"]?.schema;
    const responses = Object.entries(op.responses || {});
    return el("section", {class: "card operation", id: `${method}-${path}`, "data-path": path, "data-method": method},
      el("h2", {}, el("span", {class: `method method-${method}`, text: method.toUpperCase()}), " ",
         el("code", {class: "path", text: path}), secured ? el("span", {class: "lock", text: "bearer token", title: "needs Authorization: Bearer TOKEN"}) : null),
      op.summary ? el("p", {class: "summary", text: op.summary}) : null,
      request ? [el("h3", {text: "Request body (application/json)"}), schemaNode(request)] : null,
      el("h3", {text: "Responses"}),
      el("table", {class: "responses"}, responses.map(([code, r]) => {
        const content = Object.entries(r.content || {});
        return el("tr", {"data-status": code}, el("td", {class: "status", text: code}),
          el("td", {}, el("div", {text: r.description || ""}),
             content.map(([type, c]) => el("div", {}, el("span", {class: "muted", text: type}), c.schema ? schemaNode(c.schema) : null))));
      })));
  }

  async function start() {
    const answer = await call("GET", "/openapi.json");
    if (!answer.ok) {
      $("doc-meta").textContent = `/openapi.json answered ${answer.status}: ${errorMessage(answer)}`;
      return;
    }
    doc = answer.body;
    document.title = `${doc.info?.title ?? "nlp serve"} · API docs`;
    $("doc-title").replaceChildren(el("span", {text: doc.info?.title ?? "nlp serve"}), " ",
                                   el("span", {class: "muted", text: `API ${doc.info?.version ?? ""}`}));
    const schemes = Object.keys(doc.components?.securitySchemes || {});
    $("doc-meta").textContent = `OpenAPI ${doc.openapi ?? "?"}` +
      (schemes.length ? " · routes marked “bearer token” need the header Authorization: Bearer TOKEN" : " · no token needed");
    const ops = [];
    for (const [path, methods] of Object.entries(doc.paths || {})) {
      for (const [method, op] of Object.entries(methods)) ops.push(operation(path, method, op));
    }
    $("operations").replaceChildren(...ops);
    document.body.dataset.ready = "true";
  }

  start();
})();
