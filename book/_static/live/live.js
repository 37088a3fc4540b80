// The page "Try the model" (book/try.md): the shipped model translates in the reader's
// browser. The two ONNX graphs of chapter 30 (encoder.onnx, decoder.onnx: one greedy
// step with its key/value cache) run in onnxruntime-web, on WebAssembly, on one thread;
// the tokenizer is Hugging Face's tokenizers.js. Greedy decoding here is the package's:
// the source cut to max_len - 1 pieces and </s> added, then at most output_limit(S)
// steps, each taking the highest-scoring token (the first of equals, as torch.argmax),
// until </s>. The text is decoded from the pieces as sentencepiece decodes them.
//
// The model and runtime files are the site's _static/live/{model,runtime}/ (make book
// copies them there). The Chinese book, under zh/, reads the very same files: this
// script, in zh/_static/live/, looks three folders up for them.

const STRINGS = {
  en: {
    loading: "Loading the model…",
    ready: (s) => `The model is loaded (${s} s). Type English, then press Translate.`,
    noWasm: "This browser cannot run WebAssembly, so the model cannot run here.",
    failed: (e) => `The model could not be loaded: ${e}`,
    working: "Translating…",
    done: (n, ms, cut) => `${n} pieces in ${ms} ms` +
      (cut ? ", stopped at the length limit before </s>." : "."),
    translate: "Translate",
    kind: "Attention",
    layer: "Layer",
    head: "Head",
    mean: "mean",
    kinds: { cross: "cross-attention", self: "decoder self-attention",
             enc: "encoder self-attention" },
    axes: { cross: ["output pieces (each row: one step)", "source pieces"],
            self: ["output pieces (each row: one step)", "the decoder's input pieces"],
            enc: ["source pieces (queries)", "source pieces (keys)"] },
    legend: "weight: 0 (white) to the row's largest (dark blue); each row sums to 1",
    hover: (r, c, w) => `${r} → ${c}: ${w}`,
  },
  zh: {
    loading: "正在加载模型……",
    ready: (s) => `模型已加载（${s} 秒）。输入英文，然后按“翻译”。`,
    noWasm: "这个浏览器不能运行 WebAssembly，模型无法在这里运行。",
    failed: (e) => `模型未能加载：${e}`,
    working: "正在翻译……",
    done: (n, ms, cut) => `${n} 个词元，用时 ${ms} 毫秒` +
      (cut ? "，在 </s> 之前达到了长度上限。" : "。"),
    translate: "翻译",
    kind: "注意力",
    layer: "层",
    head: "头",
    mean: "平均",
    kinds: { cross: "交叉注意力", self: "解码器自注意力", enc: "编码器自注意力" },
    axes: { cross: ["输出词元（每行一步）", "源词元"],
            self: ["输出词元（每行一步）", "解码器的输入词元"],
            enc: ["源词元（查询）", "源词元（键）"] },
    legend: "权重：0（白）到该行最大值（深蓝）；每行之和为 1",
    hover: (r, c, w) => `${r} → ${c}：${w}`,
  },
};
const LANG = document.documentElement.lang.startsWith("zh") ? "zh" : "en";
const T = STRINGS[LANG];
const ASSETS = new URL(LANG === "zh" ? "../../../_static/live/" : "./",
                       import.meta.url);
const UNK_SURFACE = " \u2047 ";   // sentencepiece's text for <unk>

const $ = (id) => document.getElementById(id);

function say(text) {
  $("live-status").textContent = text;
}

async function fetchJson(name) {
  const r = await fetch(new URL(name, ASSETS));
  if (!r.ok) throw new Error(`${name}: HTTP ${r.status}`);
  return r.json();
}

async function load() {
  const t0 = performance.now();
  const [ort, tk, web, tokJson] = await Promise.all([
    import(new URL("runtime/ort.wasm.min.mjs", ASSETS).href),
    import(new URL("runtime/tokenizers.min.mjs", ASSETS).href),
    fetchJson("model/web.json"),
    fetchJson("model/tokenizer.json"),
  ]);
  ort.env.wasm.numThreads = 1;   // GitHub Pages cannot send the headers threads need
  ort.env.wasm.proxy = false;
  ort.env.logLevel = "error";
  ort.env.wasm.wasmPaths = new URL("runtime/", ASSETS).href;
  // both graphs read their weights from one file (chapter 30): fetched once, for both
  const externalData = [];
  const weights = Object.keys(web.files).filter((n) => !/\.(onnx|json|md)$/.test(n));
  for (const name of weights) {
    const r = await fetch(new URL(`model/${name}`, ASSETS));
    if (!r.ok) throw new Error(`${name}: HTTP ${r.status}`);
    externalData.push({ path: name, data: new Uint8Array(await r.arrayBuffer()) });
  }
  // logSeverityLevel 3: errors only (onnxruntime writes its warnings as errors)
  const options = { executionProviders: ["wasm"], graphOptimizationLevel: "all",
                    logSeverityLevel: 3, externalData };
  const [encoder, decoder] = await Promise.all(["encoder.onnx", "decoder.onnx"].map(
    (n) => ort.InferenceSession.create(new URL(`model/${n}`, ASSETS).href, options)));
  const tokenizer = new tk.Tokenizer(tokJson, {});
  const seconds = (performance.now() - t0) / 1000;
  return { ort, web, encoder, decoder, tokenizer, seconds };
}

function outputLimit(web, S) {
  // the package's inference.output_limit, as web.json states it: 1.5 times the source's
  // ids (</s> included) plus 10, at most max_len - 1
  const rule = web.max_new_tokens;
  return Math.min(S + Math.floor(S / 2) + rule.plus, rule.cap);
}

function argmax(a) {
  let best = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i;
  return best;
}

function decodePieces(web, ids) {
  // as sentencepiece's decode: "▁" is a space, none before the first piece, <unk> " ⁇ "
  let text = "";
  for (const id of ids) {
    if (id === web.pad_id || id === web.bos_id || id === web.eos_id) continue;
    let piece = id === web.unk_id ? UNK_SURFACE : web.pieces[id];
    if (text === "" && id !== web.unk_id && piece.startsWith("\u2581")) {
      piece = piece.slice(1);
    }
    text += piece.replaceAll("\u2581", " ");
  }
  return text;
}

async function translate(m, text) {
  const { ort, web } = m;
  const L = web.n_layers, H = web.n_heads, Dh = web.d_head;
  const src = m.tokenizer.encode(text, { add_special_tokens: false }).ids
    .slice(0, web.max_source_pieces).concat([web.eos_id]);
  const S = src.length;
  const enc = await m.encoder.run({
    src: new ort.Tensor("int64", BigInt64Array.from(src, BigInt), [1, S]) });
  const cross = { cross_k: enc.cross_k, cross_v: enc.cross_v };
  let selfK = new ort.Tensor("float32", new Float32Array(0), [L, H, 0, Dh]);
  let selfV = selfK;
  const out = [], crossRows = [], selfRows = [];
  let token = web.bos_id, ended = false;
  for (let p = 0; p < outputLimit(web, S); p++) {
    const r = await m.decoder.run({
      token: new ort.Tensor("int64", BigInt64Array.of(BigInt(token)), [1, 1]),
      position: new ort.Tensor("int64", BigInt64Array.of(BigInt(p)), [1]),
      self_k: selfK, self_v: selfV, ...cross });
    selfK = r.new_self_k;
    selfV = r.new_self_v;
    crossRows.push(r.cross_attn.data.slice());   // (L, H, S)
    selfRows.push(r.self_attn.data.slice());     // (L, H, p + 1)
    token = argmax(r.logits.data);
    out.push(token);
    if (token === web.eos_id) { ended = true; break; }
  }
  const ids = ended ? out.slice(0, -1) : out;
  return {
    text: decodePieces(web, ids), src, out, ended,
    srcPieces: src.map((i) => web.pieces[i]),
    outPieces: out.map((i) => web.pieces[i]),
    enc: enc.enc_attn.data.slice(),   // (L, H, S, S)
    crossRows, selfRows,
  };
}

// ---- the attention view ----

function weightsOf(result, web, kind, layer, head) {
  // rows of weights for kind, for one layer and head, or their mean (layer/head = -1)
  const L = web.n_layers, H = web.n_heads, S = result.src.length;
  const layers = layer < 0 ? [...Array(L).keys()] : [layer];
  const heads = head < 0 ? [...Array(H).keys()] : [head];
  const n = layers.length * heads.length;
  const pick = (data, width, offset) => {
    const row = new Float32Array(width);
    for (const l of layers) for (const h of heads) {
      const base = (l * H + h) * offset;
      for (let j = 0; j < width; j++) row[j] += data[base + j] / n;
    }
    return row;
  };
  if (kind === "cross") return result.crossRows.map((d) => pick(d, S, S));
  if (kind === "self") return result.selfRows.map((d, p) => pick(d, p + 1, p + 1));
  return [...Array(S).keys()].map((i) => {
    const row = new Float32Array(S);
    for (const l of layers) for (const h of heads) {
      const base = ((l * H + h) * S + i) * S;
      for (let j = 0; j < S; j++) row[j] += result.enc[base + j] / n;
    }
    return row;
  });
}

function labelsOf(result, web, kind) {
  if (kind === "cross") return [result.outPieces, result.srcPieces];
  if (kind === "self") {
    const inputs = [web.pieces[web.bos_id], ...result.outPieces.slice(0, -1)];
    return [result.outPieces, inputs];
  }
  return [result.srcPieces, result.srcPieces];
}

function shade(w) {
  // white (0) to dark blue (1)
  const t = Math.max(0, Math.min(1, w));
  const mix = (a, b) => Math.round(a + (b - a) * t);
  return `rgb(${mix(255, 8)}, ${mix(255, 48)}, ${mix(255, 107)})`;
}

function draw(state) {
  const { result, web } = state;
  const canvas = $("live-attention");
  const kind = $("live-kind").value;
  // the option values are the labels: "mean", or the layer's or head's number from 1
  const layer = $("live-layer").value, head = $("live-head").value;
  const index = (v) => (v === "mean" ? -1 : Number(v) - 1);
  const rows = weightsOf(result, web, kind, index(layer), index(head));
  const [rowLabels, colLabels] = labelsOf(result, web, kind);
  const ctx = canvas.getContext("2d");
  const font = "12px system-ui, sans-serif";
  ctx.font = font;
  const textWidth = (labels) => Math.min(130, 8 + Math.max(0, ...labels.map(
    (s) => ctx.measureText(s).width)));
  const left = textWidth(rowLabels), top = textWidth(colLabels);
  const box = canvas.parentElement.clientWidth || 600;
  const cols = colLabels.length;
  const cell = Math.max(6, Math.min(24, Math.floor((box - left - 4) / cols)));
  const width = left + cell * cols + 4, height = top + cell * rowLabels.length + 4;
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, width, height);
  rows.forEach((row, i) => {
    const peak = Math.max(...row) || 1;
    row.forEach((w, j) => {
      ctx.fillStyle = shade(w / peak);
      const side = cell - (cell > 8);   // a white line between cells where they are big
      ctx.fillRect(left + j * cell, top + i * cell, side, side);
    });
  });
  ctx.font = font;
  ctx.fillStyle = "#222";
  ctx.textBaseline = "middle";
  const every = Math.ceil(12 / cell);   // a label on each row if it fits, else every k
  const fit = (s, room) => {
    let t = s;
    while (t.length > 1 && ctx.measureText(t).width > room) t = t.slice(0, -1);
    return t === s ? s : `${t.slice(0, -1)}…`;
  };
  ctx.textAlign = "right";
  rowLabels.forEach((s, i) => {
    if (i % every) return;
    ctx.fillText(fit(s, left - 6), left - 4, top + (i + 0.5) * cell);
  });
  ctx.save();
  ctx.textAlign = "left";
  colLabels.forEach((s, j) => {
    if (j % every) return;
    ctx.setTransform(dpr, 0, 0, dpr, dpr * (left + (j + 0.5) * cell), dpr * (top - 4));
    ctx.rotate(-Math.PI / 2);
    ctx.fillText(fit(s, top - 6), 0, 0);
  });
  ctx.restore();
  const [rowAxis, colAxis] = T.axes[kind];
  $("live-axes").textContent = `↓ ${rowAxis}; → ${colAxis}`;
  canvas.setAttribute("aria-label", `${T.kinds[kind]}: ↓ ${rowAxis}; → ${colAxis}`);
  const drawn = Number(canvas.dataset.drawn || 0) + 1;
  Object.assign(canvas.dataset, { kind, layer, head, rows: rows.length, cols, drawn });
  state.grid = { rows, rowLabels, colLabels, left, top, cell };
}

function hover(state, event) {
  const g = state.grid;
  if (!g) return;
  const box = event.target.getBoundingClientRect();
  const j = Math.floor((event.clientX - box.left - g.left) / g.cell);
  const i = Math.floor((event.clientY - box.top - g.top) / g.cell);
  const row = g.rows[i];
  $("live-hover").textContent = row && j >= 0 && j < row.length
    ? T.hover(g.rowLabels[i], g.colLabels[j], row[j].toFixed(3)) : "\u00a0";
}

function fillSelect(select, n) {
  select.replaceChildren(new Option(T.mean, "mean"),
    ...[...Array(n).keys()].map((i) => new Option(String(i + 1), String(i + 1))));
}

function labelWidget(web) {
  $("live-translate").textContent = T.translate;
  $("live-kind-label").textContent = T.kind;
  $("live-layer-label").textContent = T.layer;
  $("live-head-label").textContent = T.head;
  $("live-legend").textContent = T.legend;
  const kinds = $("live-kind");
  kinds.replaceChildren(...Object.entries(T.kinds).map(([k, v]) => new Option(v, k)));
  fillSelect($("live-layer"), web ? web.n_layers : 0);
  fillSelect($("live-head"), web ? web.n_heads : 0);
}

async function main() {
  labelWidget(null);
  const wasm = typeof WebAssembly === "object" && WebAssembly;
  if (!wasm || typeof wasm.instantiate !== "function") {
    say(T.noWasm);
    return;
  }
  say(T.loading);
  let m;
  try {
    m = await load();
  } catch (e) {
    say(T.failed(e.message || e));
    throw e;
  }
  labelWidget(m.web);
  const output = $("live-output"), button = $("live-translate");
  const state = { web: m.web, result: null, grid: null };
  let count = 0;
  output.dataset.count = "0";
  output.dataset.ready = "true";
  say(T.ready(m.seconds.toFixed(1)));
  button.disabled = false;
  button.addEventListener("click", async () => {
    if (button.disabled) return;
    button.disabled = true;
    say(T.working);
    try {
      const t0 = performance.now();
      const result = await translate(m, $("live-source").value);
      const ms = Math.round(performance.now() - t0);
      output.textContent = result.text;
      state.result = result;
      $("live-view").hidden = false;
      draw(state);
      say(T.done(result.out.length, ms, !result.ended));
      output.dataset.ms = String(ms);
      output.dataset.ended = String(result.ended);   // false: it reached the limit
      output.dataset.count = String(++count);
    } catch (e) {
      say(T.failed(e.message || e));
      throw e;
    } finally {
      button.disabled = false;
    }
  });
  for (const id of ["live-kind", "live-layer", "live-head"]) {
    $(id).addEventListener("change", () => state.result && draw(state));
  }
  $("live-attention").addEventListener("mousemove", (e) => hover(state, e));
  window.addEventListener("resize", () => state.result && draw(state));
}

main();
