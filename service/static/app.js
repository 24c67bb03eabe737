// The demo chat page: POST /v1/answer with stream: true, show the tokens as they arrive, then
// the validated answer with its citations and source cards. Each question goes with the
// conversation before it, so a follow-up ("How many windows does it have?") is answered as the
// question it stands for; a photo stays in the conversation until removed or replaced. Server
// strings only ever go into textContent or attributes, never into HTML.
"use strict";

const log = document.getElementById("log");
const form = document.getElementById("ask");
const input = document.getElementById("question");
const send = document.getElementById("send");
const modality = document.getElementById("modality");
const statusLine = document.getElementById("status");
const imageInput = document.getElementById("image");
const attached = document.getElementById("attached");
const attachedName = document.getElementById("attached-name");
const uploads = new Map(); // turn -> object URL of the photo asked about, shown on its cards
const history = []; // the conversation so far: {role: "user" | "assistant", content}
let photo = null; // the photo of the conversation, sent with every question until removed
const welcome = document.getElementById("welcome").cloneNode(true);
const announcer = document.getElementById("announcer");

const MARKERS = /\[(\d{1,2}(?:\s*,\s*\d{1,2})*)\]/g;
const reducedMotion = window.matchMedia("(prefers-reduced-motion: reduce)");
let turns = 0;

// ---- small DOM helpers ------------------------------------------------------------------------

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function safeUrl(value) {
  // Only http(s) links, or this service's own paths: never javascript: or data: URLs.
  try {
    const url = new URL(value, window.location.href);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}

function nearBottom() {
  const page = document.scrollingElement;
  return page.scrollHeight - page.scrollTop - page.clientHeight < 120;
}

function keepInView(wasNearBottom) {
  if (wasNearBottom) window.scrollTo({ top: document.scrollingElement.scrollHeight });
}

// ---- service status ---------------------------------------------------------------------------

async function loadHealth() {
  try {
    const response = await fetch("/healthz", { headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const health = await response.json();
    const images =
      health.image_vectors === "clip" ? "images by CLIP vectors" : "images via their captions";
    const ocr = health.ocr ? ` · text read in ${health.ocr.images_with_text} images` : "";
    const retrievers = (health.retrievers || []).join(" + ") || "no retrievers";
    statusLine.textContent =
      `${Number(health.sources).toLocaleString()} sources · ${retrievers} · ${images}${ocr}`;
    statusLine.title = `fusion: ${health.fusion}; image vectors: ${health.image_vectors}`;
    statusLine.dataset.state = health.status === "ok" ? "ok" : "down";
  } catch (error) {
    statusLine.textContent = `Service unreachable (${error.message})`;
    statusLine.dataset.state = "down";
  }
}

// ---- server-sent events over fetch ------------------------------------------------------------

function parseEvent(block) {
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  return data.length ? { event, data: data.join("\n") } : null;
}

async function* readEvents(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
    // Normalise line ends; a "\r" at the very end may be half of a "\r\n" still to come.
    const held = !done && buffer.endsWith("\r") ? "\r" : "";
    if (held) buffer = buffer.slice(0, -1);
    buffer = buffer.replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) !== -1) {
      const parsed = parseEvent(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 2);
      if (parsed) yield parsed;
    }
    buffer += held;
    if (done) {
      const parsed = parseEvent(buffer.replace(/\r/g, "\n"));
      if (parsed) yield parsed;
      return;
    }
  }
}

function errorDetail(body, status) {
  // FastAPI gives {"detail": "..."} or, from validation, {"detail": [{"msg": ...}, ...]}.
  const detail = body && body.detail;
  if (typeof detail === "string" && detail) return detail;
  if (Array.isArray(detail) && detail.length) {
    return detail.map((item) => (item && item.msg) || JSON.stringify(item)).join("; ");
  }
  return `The service answered HTTP ${status}.`;
}

// ---- conversation bubbles ---------------------------------------------------------------------

function addQuestion(text, photoUrl) {
  const bubble = el("article", "turn question");
  bubble.setAttribute("aria-label", "Your question");
  if (photoUrl) {
    const img = el("img", "question-photo");
    img.alt = "Your photo";
    img.src = photoUrl;
    bubble.append(img);
  }
  bubble.append(el("p", "bubble-text", text));
  log.append(bubble);
  return bubble;
}

function addAnswer() {
  const bubble = el("article", "turn answer");
  bubble.setAttribute("aria-label", "Answer");
  bubble.setAttribute("aria-busy", "true");
  bubble.dataset.state = "streaming";
  const text = el("p", "answer-text streaming");
  text.append(el("span", "thinking", "Searching the sources…"));
  bubble.append(text);
  log.append(bubble);
  return bubble;
}

function appendToken(bubble, delta) {
  const text = bubble.querySelector(".answer-text");
  const thinking = text.querySelector(".thinking");
  if (thinking) thinking.remove();
  text.append(document.createTextNode(delta));
}

function showError(bubble, message) {
  bubble.replaceChildren(el("p", "notice error", message));
  bubble.querySelector(".notice").setAttribute("role", "alert");
  finish(bubble, "error");
  announcer.textContent = message;
}

function finish(bubble, state) {
  bubble.dataset.state = state;
  bubble.removeAttribute("aria-busy");
}

function placeRegion(mark, img, box) {
  // The thumbnail is drawn with object-fit: cover (scaled to fill, centred, cropped): map the
  // box from the image's pixels to the thumbnail's, and keep it within what is visible.
  const [w, h] = [img.naturalWidth, img.naturalHeight];
  const [boxW, boxH] = [img.clientWidth, img.clientHeight];
  if (!w || !h || !boxW || !boxH) return;
  const scale = Math.max(boxW / w, boxH / h);
  const dx = (boxW - w * scale) / 2;
  const dy = (boxH - h * scale) / 2;
  const left = Math.max(0, dx + box.left * scale);
  const top = Math.max(0, dy + box.top * scale);
  const right = Math.min(boxW, dx + box.right * scale);
  const bottom = Math.min(boxH, dy + box.bottom * scale);
  mark.hidden = right - left < 1 || bottom - top < 1;
  mark.style.left = `${img.offsetLeft + left}px`;
  mark.style.top = `${img.offsetTop + top}px`;
  mark.style.width = `${right - left}px`;
  mark.style.height = `${bottom - top}px`;
}

function drawRegion(card, img, box) {
  // The region of a cited image that supports the answer, from the service's grounder.
  const sides = [box.left, box.top, box.right, box.bottom];
  if (!sides.every((value) => Number.isFinite(value))) return;
  const mark = el("span", "region");
  mark.hidden = true;
  mark.setAttribute("role", "img");
  mark.setAttribute("aria-label", `Region that supports the answer: ${box.label || "boxed"}`);
  mark.title = box.label ? `Supports the answer: ${box.label}` : "Supports the answer";
  card.classList.add("grounded");
  card.append(mark);
  const place = () => placeRegion(mark, img, box);
  img.addEventListener("load", place);
  if (img.complete) place();
  new ResizeObserver(place).observe(img);
}

function cardText(text, span) {
  // The snippet, with the sentence that supports the answer marked. The service counts
  // characters as Python does (code points); JavaScript strings count UTF-16 units.
  const paragraph = el("p", "card-text");
  const chars = Array.from(text);
  const [start, end] = span ? [span.start, span.end] : [0, 0];
  if (!(Number.isInteger(start) && Number.isInteger(end) && start >= 0 && start < end && end <= chars.length)) {
    paragraph.textContent = text;
    return paragraph;
  }
  const mark = el("mark", "support", chars.slice(start, end).join(""));
  mark.title = "The sentence that supports the answer";
  paragraph.append(
    document.createTextNode(chars.slice(0, start).join("")),
    mark,
    document.createTextNode(chars.slice(end).join("")),
  );
  return paragraph;
}

// What checked a citation, where a judge model did: it looked at the image, or read the text
// where the text verifier was unsure. A citation its text alone settled gets no label.
const JUDGED = {
  image: ["seen in the image", "A vision-language model looked at the image and confirmed the answer"],
  model: ["confirmed by the judge model", "A judge model read this source and confirmed that it says the answer"],
};

function judgedLabel(citation) {
  if (!citation || !Object.hasOwn(JUDGED, citation.judged_by)) return null;
  const judged = JUDGED[citation.judged_by];
  const sure = typeof citation.support === "number" ? ` (${Math.round(citation.support * 100)}%)` : "";
  const label = el("span", "judged", `${judged[0]}${sure}`);
  label.title = judged[1];
  return label;
}

function sourceCard(source, number, cited, turn, citation) {
  const box = citation ? citation.box : null;
  const card = el("article", `card ${source.modality === "image" ? "image" : "text"}`);
  card.id = `s${turn}-${number}`;
  card.tabIndex = -1;
  card.dataset.sourceId = source.source_id;
  if (!cited) card.classList.add("uncited");
  const title = source.title || source.source_id;

  // An uploaded photo has no route on the service: its card shows the local copy.
  const imageUrl = source.image_url ? safeUrl(source.image_url) : uploads.get(turn) ?? null;
  if (imageUrl) {
    const img = el("img", "thumb");
    img.loading = "lazy";
    img.decoding = "async";
    img.alt = title;
    img.width = 192;
    img.height = 144;
    img.addEventListener("error", () => img.classList.add("broken"), { once: true });
    img.src = imageUrl;
    card.append(img);
    if (box) drawRegion(card, img, box);
  }

  const body = el("div", "card-body");
  const heading = el("h3", "card-title");
  heading.append(el("span", "card-number", number), document.createTextNode(title));
  body.append(heading);
  if (source.text) body.append(cardText(source.text, citation ? citation.span : null));
  if (source.ocr_text) {
    const read = el("p", "card-ocr");
    read.append(el("span", "card-ocr-label", "Text in the image: "), el("q", null, source.ocr_text));
    body.append(read);
  }

  const meta = el("p", "card-meta");
  meta.append(el("span", "modality", source.modality), el("span", "source-id", source.source_id));
  if (typeof source.score === "number") {
    meta.append(el("span", "score", `relevance ${source.score.toFixed(2)}`));
  }
  if (!cited) meta.append(el("span", "uncited-label", "not cited"));
  const judged = judgedLabel(citation);
  if (judged) meta.append(judged);
  const href = source.url ? safeUrl(source.url) : null;
  if (href) {
    const link = el("a", "card-link", source.modality === "image" ? "image page" : "open source");
    link.href = href;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
    link.setAttribute("aria-label", `Open “${title}” in a new tab`);
    meta.append(link);
  }
  body.append(meta);
  card.append(body);
  return card;
}

function focusSource(bubble, cardId) {
  const card = document.getElementById(cardId);
  if (!card) return;
  for (const other of bubble.querySelectorAll(".card.highlight")) {
    other.classList.remove("highlight");
  }
  void card.offsetWidth; // restart the flash animation when the same card is picked again
  card.classList.add("highlight");
  card.scrollIntoView({ behavior: reducedMotion.matches ? "auto" : "smooth", block: "nearest" });
  card.focus({ preventScroll: true });
}

function renderAnswer(bubble, result, turn) {
  const sources = Array.isArray(result.sources) ? result.sources : [];
  const citations = Array.isArray(result.citations) ? result.citations : [];
  const citedIds = new Set(citations.map((c) => c.source_id));
  const citationOf = new Map(citations.map((c) => [c.source_id, c]));
  const byMarker = new Map(citations.map((c) => [c.marker, c.source_id]));
  const sourceIndex = (n) => {
    // The citation names its source; the numbering of `sources` ([1] first) is the fallback.
    const id = byMarker.get(n) ?? sources[n - 1]?.source_id;
    return sources.findIndex((s) => s.source_id === id);
  };

  const parts = [];
  const answer = typeof result.answer === "string" ? result.answer : "";
  // A declined answer says the sources do not answer; its sources are only related ones.
  const declined = result.abstained === true;
  if (answer) {
    const text = el("p", declined ? "answer-text declined" : "answer-text");
    let last = 0;
    for (const match of answer.matchAll(MARKERS)) {
      text.append(document.createTextNode(answer.slice(last, match.index)));
      for (const n of match[1].split(",").map((x) => Number(x.trim()))) {
        const index = sourceIndex(n);
        if (index === -1) {
          text.append(document.createTextNode(`[${n}]`));
          continue;
        }
        const source = sources[index];
        const target = `s${turn}-${index + 1}`;
        const chip = el("button", "chip", n);
        chip.type = "button";
        chip.setAttribute("aria-controls", target);
        chip.setAttribute("aria-label", `Source ${n}: ${source.title || source.source_id}`);
        chip.title = source.title || source.source_id;
        chip.addEventListener("click", () => focusSource(bubble, target));
        text.append(chip);
      }
      last = match.index + match[0].length;
    }
    text.append(document.createTextNode(answer.slice(last)));
    parts.push(text);
  }

  // What the model wrote that its sources do not say: left out of the answer, shown muted.
  const cuts = Array.isArray(result.cut) ? result.cut : [];
  for (const cut of cuts) {
    if (typeof cut?.text !== "string" || !cut.text) continue;
    const said = el("p", "cut");
    said.append(el("span", "cut-label", "Left out, not in the sources: "));
    said.append(el("s", "cut-text", cut.text));
    if (typeof cut.reason === "string" && cut.reason) {
      said.append(el("span", "cut-reason", ` (${cut.reason})`));
    }
    parts.push(said);
  }

  if (result.generation_error) {
    const notice = el(
      "p",
      "notice error",
      `The generator failed: ${result.generation_error} — here are the retrieved sources.`,
    );
    notice.setAttribute("role", "alert");
    parts.push(notice);
  } else if (!answer) {
    parts.push(el("p", "notice", "No answer was written."));
  }

  if (sources.length) {
    const list = el("div", "sources");
    list.setAttribute("role", "group");
    list.setAttribute("aria-label", "Sources");
    sources.forEach((source, i) => {
      const cited = citedIds.has(source.source_id) || result.generation_error;
      list.append(sourceCard(source, i + 1, Boolean(cited), turn, citationOf.get(source.source_id)));
    });
    const heading = declined ? "Related sources" : sources.length === 1 ? "Source" : "Sources";
    parts.push(el("h2", "sources-heading", heading), list);
  } else {
    parts.push(el("p", "notice", "No source was relevant enough to cite."));
  }

  bubble.replaceChildren(...parts);
  finish(bubble, result.generation_error ? "failed" : declined ? "declined" : "done");
  announcer.textContent = result.generation_error
    ? `The generator failed. ${sources.length} retrieved sources shown.`
    : declined
      ? `No answer: ${answer} ${sources.length} related sources shown.`
      : `Answer: ${result.answer_without_markers || answer}`;
}

// ---- asking -----------------------------------------------------------------------------------

function answerRequest(question, conversation) {
  // A photo goes as a multipart form (the browser sets its boundary); a question alone as JSON.
  if (!photo) {
    return {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify({ question, modality: modality.value, stream: true, conversation }),
    };
  }
  const form = new FormData();
  form.append("question", question);
  form.append("modality", modality.value);
  form.append("stream", "true");
  form.append("conversation", JSON.stringify(conversation));
  form.append("image", photo.file);
  return { method: "POST", headers: { Accept: "text/event-stream" }, body: form };
}

function showResolved(questionBubble, asked, result) {
  // A follow-up is answered as the question it stands for: say so when that differs.
  if (typeof result.question !== "string" || !result.question || result.question === asked) {
    return;
  }
  const note = el("p", "resolved", `Answered as: “${result.question}”`);
  note.title = "Your question, read with the conversation before it";
  questionBubble.append(note);
}

async function ask(question) {
  const turn = ++turns;
  if (photo) uploads.set(turn, photo.url);
  document.getElementById("welcome")?.remove();
  const questionBubble = addQuestion(question, uploads.get(turn));
  const bubble = addAnswer();
  keepInView(true);
  const conversation = history.slice();

  const answered = (result) => {
    showResolved(questionBubble, question, result);
    if (!result.generation_error && typeof result.answer === "string" && result.answer) {
      history.push({ role: "user", content: question }, { role: "assistant", content: result.answer });
    }
  };

  let response;
  try {
    response = await fetch("/v1/answer", answerRequest(question, conversation));
  } catch (error) {
    showError(bubble, `Could not reach the service: ${error.message}. Is it running?`);
    return false;
  }

  try {
    if (!response.ok) {
      let body = null;
      try {
        body = await response.json();
      } catch {
        // not JSON: a proxy's error page, say
      }
      showError(bubble, `Error ${response.status}: ${errorDetail(body, response.status)}`);
      return false;
    }
    const type = response.headers.get("Content-Type") || "";
    if (!type.startsWith("text/event-stream")) {
      const result = await response.json(); // a server that does not stream
      renderAnswer(bubble, result, turn);
      answered(result);
      return true;
    }
    for await (const { event, data } of readEvents(response.body)) {
      const wasNearBottom = nearBottom();
      const payload = JSON.parse(data);
      if (event === "token") appendToken(bubble, payload.text ?? "");
      else if (event === "answer") {
        renderAnswer(bubble, payload, turn);
        answered(payload);
      }
      else if (event === "error") showError(bubble, `Error: ${errorDetail(payload, 200)}`);
      keepInView(wasNearBottom);
    }
    if (bubble.dataset.state === "streaming") {
      showError(bubble, "The answer stream ended before the answer arrived.");
    }
  } catch (error) {
    showError(bubble, `The connection broke while answering: ${error.message}`);
  }
  return bubble.dataset.state !== "error";
}

function detach() {
  // The conversation's photo goes; the object URLs of earlier turns stay for their cards.
  photo = null;
  imageInput.value = "";
  attached.hidden = true;
}

function newConversation() {
  history.length = 0;
  detach();
  uploads.clear();
  turns = 0;
  log.replaceChildren(welcome.cloneNode(true));
  bindExamples();
  announcer.textContent = "New conversation.";
  input.focus();
}

imageInput.addEventListener("change", () => {
  const file = imageInput.files[0];
  if (file) photo = { file, url: URL.createObjectURL(file) };
  attached.hidden = !photo;
  attachedName.textContent = photo ? photo.file.name : "";
  attached.title = "This photo goes with every question until you remove it";
  input.focus();
});
document.getElementById("new-conversation").addEventListener("click", newConversation);
document.getElementById("detach").addEventListener("click", () => {
  detach();
  input.focus();
});

function setBusy(busy) {
  input.disabled = busy;
  send.disabled = busy;
  modality.disabled = busy;
  imageInput.disabled = busy;
  form.setAttribute("aria-busy", String(busy));
}

function resize() {
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight, 200)}px`;
}

async function submit(question) {
  question = question.trim();
  if (!question || send.disabled) return;
  input.value = "";
  resize();
  setBusy(true);
  let answered = false;
  try {
    answered = await ask(question);
  } finally {
    setBusy(false);
    if (!answered && !input.value) input.value = question; // to fix and send again
    resize();
    input.focus();
    keepInView(true);
  }
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  submit(input.value);
});

input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    form.requestSubmit();
  }
});

input.addEventListener("input", resize);

function bindExamples() {
  for (const example of document.querySelectorAll(".example")) {
    example.addEventListener("click", () => submit(example.textContent));
  }
}

bindExamples();

loadHealth();
input.focus();
