// Shared by the playground and the docs page: DOM building without HTML parsing, the bearer
// token (kept in sessionStorage: gone when the tab closes, never sent anywhere but this server),
// and calls to this server's public API.
"use strict";

const Nlp = (() => {
  const TOKEN_KEY = "nlp-serve-token";

  // An element with text children only: every string becomes a text node (never parsed as HTML),
  // so a model's output or a user's text shows as the characters it is.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = String(value);
      else if (key.startsWith("data-")) node.dataset[key.slice(5).replace(/-(.)/g, (_, c) => c.toUpperCase())] = String(value);
      else if (key === "style") Object.assign(node.style, value);  // CSSOM, allowed by the page's CSP
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (/^(inner|outer)html$/i.test(key)) throw new Error("el() sets no HTML: " + key);
      else node[key] = value;  // properties (value, type, title, ...)
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function token() {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  }

  function setToken(value) {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  }

  // {status, ok, body}: body is the parsed JSON (or the text when it is not JSON)
  async function call(method, path, payload) {
    const headers = {};
    // a header value is bytes: a token's UTF-8 bytes go as one character each (what the server
    // compares), since fetch refuses characters past U+00FF in a header
    if (token()) headers["Authorization"] = "Bearer " + Array.from(new TextEncoder().encode(token()), (b) => String.fromCharCode(b)).join("");
    if (payload !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {method, headers, cache: "no-store", credentials: "omit",
                                        body: payload === undefined ? undefined : JSON.stringify(payload)});
    const text = await response.text();
    let body = text;
    try { body = JSON.parse(text); } catch (err) { /* a plain-text answer (/metrics) */ }
    return {status: response.status, ok: response.ok, body};
  }

  // The message of an error answer: {"error", "message"} here, {"error": message} on TEI's routes
  function errorMessage(answer) {
    const b = answer.body;
    if (b && typeof b === "object") return String(b.message || b.error || JSON.stringify(b));
    return String(b || "no answer");
  }

  // Follows "#/components/schemas/X" references of an OpenAPI document
  function deref(doc, schema, depth = 0) {
    if (!schema || typeof schema !== "object" || !schema.$ref || depth > 20) return schema || {};
    const parts = String(schema.$ref).replace(/^#\//, "").split("/");
    let target = doc;
    for (const part of parts) target = target && typeof target === "object" ? target[part] : undefined;
    return deref(doc, target, depth + 1);
  }

  return {el, token, setToken, call, errorMessage, deref};
})();
