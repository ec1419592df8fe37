// The bertlab serve page: pick a model, then use the tasks it answers. Plain JS, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
let models = [];

function lines(id) {
  return $(id).value.split("\n").map((s) => s.trim()).filter((s) => s);
}

function showError(message) {
  $("error").textContent = message || "";
}

async function post(path, body) {
  showError("");
  const response = await fetch(path, {
    method: "POST", headers: {"content-type": "application/json"},
    body: JSON.stringify({model: $("model").value, ...body}),
  });
  const data = await response.json();
  if (!response.ok) {
    const detail = typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail);
    showError(`${response.status}: ${detail}`);
    throw new Error(detail);
  }
  return data;
}

// --- models and tabs ----------------------------------------------------------------------------
async function loadModels() {
  const data = await (await fetch("/v1/models")).json();
  if (data.loading) {  // models still loading: ask again shortly
    setTimeout(loadModels, 500);
    return;
  }
  models = data.models;
  $("model").innerHTML = models.map((m) => `<option value="${m.name}">${m.name} (${m.kind})</option>`).join("");
  $("status").textContent = `${models.length} model(s) loaded`;
  showTabs();
}

function showTabs() {
  const model = models.find((m) => m.name === $("model").value);
  const tasks = model ? model.tasks : [];
  $("tabs").innerHTML = tasks.map((t) => `<button data-tab="${t}">${t}</button>`).join("");
  for (const button of $("tabs").querySelectorAll("button")) {
    button.onclick = () => openTab(button.dataset.tab);
  }
  if (tasks.length) openTab(tasks[0]);
}

function openTab(task) {
  for (const b of $("tabs").querySelectorAll("button")) b.classList.toggle("active", b.dataset.tab === task);
  for (const s of document.querySelectorAll("section")) s.classList.toggle("active", s.dataset.task === task);
}

// --- tasks --------------------------------------------------------------------------------------
$("embed-run").onclick = async () => {
  const data = await post("/v1/embed", {texts: lines("embed-texts")});
  $("embed-out").textContent = data.embeddings.map((v, i) =>
    `text ${i + 1}: ${v.length} numbers [${v.slice(0, 4).map((x) => x.toFixed(4)).join(", ")}, …]`).join("\n");
};

$("similar-run").onclick = async () => {
  const data = await post("/v1/similar", {query: $("similar-query").value, texts: lines("similar-texts")});
  $("similar-out").innerHTML = "";
  for (const hit of data.results) {
    const item = document.createElement("li");
    item.textContent = `${hit.score.toFixed(4)}  ${hit.text}`;
    $("similar-out").appendChild(item);
  }
};

$("classify-run").onclick = async () => {
  const texts = lines("classify-texts");
  const data = await post("/v1/classify", {texts});
  $("classify-out").innerHTML = "";
  data.predictions.forEach((p, i) => {
    const row = $("classify-out").insertRow();
    row.insertCell().textContent = texts[i];
    row.insertCell().textContent = "label" in p ? p.label : "";
    row.insertCell().textContent = "probability" in p ? p.probability.toFixed(4) : JSON.stringify(p);
  });
};

$("ner-run").onclick = async () => {
  const data = await post("/v1/ner", {texts: [$("ner-text").value]});
  const p = data.predictions[0];
  $("ner-out").innerHTML = "";
  p.words.forEach((word, i) => {
    const tag = document.createElement("span");
    tag.className = "tag";
    tag.textContent = word;
    const label = document.createElement("b");
    label.textContent = p.tags[i];
    tag.appendChild(label);
    $("ner-out").appendChild(tag);
  });
};

$("qa-run").onclick = async () => {
  const data = await post("/v1/qa", {question: $("qa-question").value, context: $("qa-context").value});
  const best = data.nbest[0];
  $("qa-out").textContent = data.answer === "" ? "(no answer)" :
    `${data.answer}   (probability ${best.probability.toFixed(4)})`;
};

$("fill-run").onclick = async () => {
  const data = await post("/v1/fill-mask", {texts: [$("fill-text").value]});
  $("fill-out").textContent = data.results[0].map((mask, i) =>
    `[MASK] ${i + 1}: ` + mask.map((p) => `${p.token} ${p.probability.toFixed(4)}`).join("   ")).join("\n");
};

$("translate-run").onclick = async () => {
  const data = await post("/v1/translate", {texts: lines("translate-texts"), beam: Number($("translate-beam").value)});
  $("translate-out").textContent = data.translations.join("\n");
};

// Generation streams server-sent events ("data: {...}\n\n") over a POST, read piece by piece.
$("generate-run").onclick = async () => {
  showError("");
  const out = $("generate-out");
  out.textContent = $("generate-prompt").value;
  out.dataset.done = "";
  const response = await fetch("/v1/generate", {
    method: "POST", headers: {"content-type": "application/json"},
    body: JSON.stringify({model: $("model").value, prompt: $("generate-prompt").value,
                          max_new_tokens: Number($("generate-n").value),
                          temperature: Number($("generate-temperature").value), stream: true}),
  });
  if (!response.ok) {
    const data = await response.json();
    showError(`${response.status}: ${typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail)}`);
    return;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true});
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = JSON.parse(buffer.slice(0, end).replace(/^data: /, ""));
      buffer = buffer.slice(end + 2);
      if (event.error) showError(event.error);
      else if (event.done) out.dataset.done = "true";
      else out.textContent += event.text;
    }
  }
};

// Attention: one head's (tokens x tokens) weights drawn as a heatmap, darker = more attention.
let attention = null;
$("attention-run").onclick = async () => {
  attention = await post("/v1/attention", {text: $("attention-text").value, layer: Number($("attention-layer").value)});
  const heads = attention.weights.length;
  $("attention-head").innerHTML = ["mean"].concat([...Array(heads).keys()])
    .map((h) => `<option value="${h}">${h}</option>`).join("");
  drawAttention();
};
$("attention-head").onchange = drawAttention;

function drawAttention() {
  const choice = $("attention-head").value;
  const w = attention.weights;
  const n = attention.tokens.length;
  const cell = Math.max(12, Math.min(36, Math.floor(480 / n)));
  const weight = (i, j) => choice === "mean" ? w.reduce((s, h) => s + h[i][j], 0) / w.length : w[Number(choice)][i][j];
  const canvas = $("attention-canvas");
  const ctx = canvas.getContext("2d");
  ctx.font = "12px sans-serif";
  const margin = 8 + Math.max(...attention.tokens.map((t) => ctx.measureText(t).width));
  canvas.width = margin + n * cell + 4;
  canvas.height = margin + n * cell + 4;
  ctx.font = "12px sans-serif";
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      const shade = Math.round(255 * (1 - weight(i, j)));
      ctx.fillStyle = `rgb(${shade}, ${shade}, 255)`;
      ctx.fillRect(margin + j * cell, margin + i * cell, cell - 1, cell - 1);
    }
  }
  ctx.fillStyle = "#222";
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  attention.tokens.forEach((t, i) => ctx.fillText(t, margin - 4, margin + i * cell + cell / 2));  // queries
  attention.tokens.forEach((t, j) => {  // keys, written upwards along the top
    ctx.save();
    ctx.translate(margin + j * cell + cell / 2, margin - 4);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "left";
    ctx.fillText(t, 0, 0);
    ctx.restore();
  });
  canvas.dataset.cells = String(n * n);
}

$("model").onchange = showTabs;
loadModels();
