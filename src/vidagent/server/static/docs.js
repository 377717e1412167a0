// vidagent's API docs, drawn from /openapi.json by the server's own page (no CDN: it works offline).
"use strict";

const node = (tag, attrs = {}, ...children) => {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) element.setAttribute(key, value);
  for (const child of children.flat()) if (child !== null && child !== undefined) element.append(child);
  return element;
};

// a schema in a few words: "string", "array of string", "AskBody", "integer ≥ 1"
function typeOf(schema, spec) {
  if (!schema) return "";
  if (schema.$ref) return schema.$ref.split("/").pop();
  if (schema.anyOf) return schema.anyOf.map((s) => typeOf(s, spec)).join(" or ");
  if (schema.type === "array") return `array of ${typeOf(schema.items, spec)}`;
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  const bounds = [schema.minimum !== undefined ? `≥ ${schema.minimum}` : "", schema.maximum !== undefined ? `≤ ${schema.maximum}` : ""].filter(Boolean).join(", ");
  return `${schema.type || "object"}${bounds ? ` (${bounds})` : ""}`;
}

function fields(schema, spec) {
  const resolved = schema?.$ref ? spec.components.schemas[schema.$ref.split("/").pop()] : schema;
  if (!resolved?.properties) return null;
  const required = new Set(resolved.required || []);
  return node("table", { class: "fields" }, node("tbody", {}, Object.entries(resolved.properties).map(([name, field]) =>
    node("tr", {}, node("td", {}, node("code", {}, name), required.has(name) ? " *" : ""), node("td", {}, typeOf(field, spec)),
      node("td", { class: "muted" }, field.description || (field.default !== undefined ? `default ${JSON.stringify(field.default)}` : ""))))));
}

async function start() {
  const box = document.querySelector("#operations");
  try {
    const response = await fetch("/openapi.json");
    const spec = await response.json();
    document.title = `${spec.info.title} ${spec.info.version} API`;
    document.querySelector("#docs-intro").prepend(node("span", {}, `${spec.info.description} `));
    for (const [path, methods] of Object.entries(spec.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        const parameters = (operation.parameters || []).map((p) => node("li", {}, node("code", {}, p.name), ` (${p.in}${p.required ? ", required" : ""}): ${typeOf(p.schema, spec)}`));
        const body = operation.requestBody?.content?.["application/json"]?.schema;
        box.append(node("section", { class: "operation panel", "data-path": path, "data-method": method },
          node("h3", {}, node("span", { class: `method ${method}` }, method.toUpperCase()), " ", node("code", {}, path)),
          node("p", {}, operation.summary || ""),
          parameters.length ? node("ul", {}, parameters) : null,
          body ? node("div", {}, node("b", {}, "JSON body: "), typeOf(body, spec), fields(body, spec)) : null));
      }
    }
  } catch (error) {
    box.append(node("p", { class: "notice" }, `cannot read /openapi.json: ${error.message}`));
  }
  document.body.dataset.ready = "true";
}

start();
