// Groundwire's web page: a conversation over POST /v1/chat (server-sent events read
// from the response body stream), a search mode over POST /v1/search and a collection
// picker filled from GET /v1/models (the upload panel is upload.js); each answer can
// be rated (POST /v1/feedback) and past conversations reopened (GET /v1/conversations). Answers are
// Markdown rendered with marked and sanitised with DOMPurify (both vendored under
// /static/vendor/: the page's CSP allows only this gateway's own scripts, no inline
// code, no eval). No framework, no build step.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const form = $("ask");
  const question = $("question");
  const transcript = $("transcript");
  const statusEl = $("status");
  const sourcesEl = $("sources");
  const stagesBody = $("stages").querySelector("tbody");
  const sendBtn = $("send");
  const stopBtn = $("stop");
  const picker = $("collection");

  const MAX_MESSAGES = 20;  // the gateway's limit on a conversation
  const MAX_PART_CHARS = 4000;
  const MODEL_PREFIX = "groundwire:";
  const SEARCH_LIMIT = 10;
  let history = [];  // [{role, content}] of the turns answered so far
  let conversationId = null;  // the stored conversation the next question continues
  let controller = null;
  let busy = false;

  // ------------------------------------------------------------ small helpers

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function setStatus(text, isError) {
    statusEl.textContent = text;
    statusEl.classList.toggle("error", Boolean(isError));
  }

  function setBusy(value) {
    busy = value;
    sendBtn.disabled = value;
    stopBtn.disabled = !value;
  }

  function mode() {
    return document.querySelector("input[name='mode']:checked").value;
  }

  function authHeaders(extra) {
    const headers = Object.assign({}, extra || {});
    const key = $("apikey").value.trim();
    if (key) headers.Authorization = `Bearer ${key}`;
    return headers;
  }

  function safeUrl(url) {
    if (!url || !String(url).trim()) return null;  // "" would resolve to this page
    try {
      const parsed = new URL(url, window.location.href);
      return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
    } catch (e) {
      return null;
    }
  }

  // Every source opens: its URL when it has one, else the gateway's view of the
  // stored document with the cited chunk marked and scrolled to (#cited), and the
  // supporting sentence inside it highlighted when the citation carries its span.
  function sourceHref(s, collection, span) {
    const url = safeUrl(s.url);
    if (url) return url;
    const params = new URLSearchParams({ source_id: s.source_id });
    if (collection) params.set("collection", collection);
    if (s.chunk_id) params.set("chunk", s.chunk_id);
    if (s.chunk_id && span) {
      params.set("start", String(span[0]));
      params.set("end", String(span[1]));
    }
    return `/v1/sources/view?${params}#cited`;
  }

  function openInNewTab(link, href) {
    link.href = href;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
  }

  // A tab opened by a link sends no Authorization header, so the stored-document view
  // refused a caller whose key the server requires (404/401 for tenant keys). With a
  // key typed in, a click on a link to the view fetches it here, with the key, and
  // writes the (server-rendered, script-free) page into the new tab.
  async function openStoredWithKey(event) {
    const link = event.target.closest && event.target.closest("a[href]");
    if (!link || event.defaultPrevented || event.button !== 0) return;
    const url = new URL(link.href, window.location.href);
    if (url.origin !== window.location.origin || url.pathname !== "/v1/sources/view") return;
    if (!$("apikey").value.trim()) return;  // no key: the plain link works
    event.preventDefault();
    const tab = window.open("", "_blank");
    if (!tab) return;
    tab.opener = null;
    try {
      const response = await fetch(url.pathname + url.search, { headers: authHeaders() });
      const html = response.ok ? await response.text()
        : `<!doctype html><p>${(await errorOf(response)).replace(/[<&]/g, (c) => (c === "<" ? "&lt;" : "&amp;"))}</p>`;
      tab.document.open();
      tab.document.write(html);
      tab.document.close();
      const cited = url.hash && tab.document.getElementById(url.hash.slice(1));
      if (cited) cited.scrollIntoView();
    } catch (e) {
      tab.close();
      setStatus(`Could not open the source: ${e.message}`, true);
    }
  }
  document.addEventListener("click", openStoredWithKey);

  function sourceLabel(s) {
    const path = (s.heading_path || []).join(" › ");
    return path || s.title || s.source_id;
  }

  async function errorOf(response) {
    try {
      const body = await response.json();
      const e = body.error || {};
      const wait = response.headers.get("Retry-After");
      return `${e.message || response.statusText} (${e.code || response.status})` +
        (wait ? ` — retry in ${wait}s` : "");
    } catch (e) {
      return `HTTP ${response.status}`;
    }
  }

  // ------------------------------------------------------------ Markdown

  // Links in an answer open in a new tab and never carry a referrer.
  window.DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.getAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  });
  const PURIFY = {
    // no images, styles or forms from an answer: the CSP would block remote images
    // anyway, and a form or a style could imitate the page's own controls
    FORBID_TAGS: ["img", "style", "form", "input", "button", "textarea", "select"],
    FORBID_ATTR: ["style"],
  };

  // The answer so far as sanitised HTML. Called on every delta: a half-received code
  // fence renders as an open code block until its closing fence arrives.
  function renderMarkdown(target, text) {
    const html = window.marked.parse(text, { gfm: true, breaks: false, async: false });
    target.innerHTML = window.DOMPurify.sanitize(html, PURIFY);
  }

  // ------------------------------------------------------------ transcript

  function clearCurrentIds() {
    for (const id of ["answer", "citations"]) {
      const old = $(id);
      if (old) old.removeAttribute("id");
    }
  }

  // One turn: the user's message, then the reply's container. The reply of the turn
  // being answered carries id="answer" (its text) and id="citations" (its chips).
  function addTurn(kind, text, collection) {
    const empty = $("empty");
    if (empty) empty.remove();
    clearCurrentIds();
    const turn = el("article", `turn ${kind}`);
    turn.setAttribute("aria-label", kind === "search" ? "Search" : "Question and answer");
    const user = el("div", "msg user");
    const who = el("p", "who", kind === "search" ? "You searched" : "You asked");
    user.append(who, el("p", "text", text));
    const reply = el("div", "msg assistant");
    const meta = el("p", "who", collection ? `Groundwire · ${collection}` : "Groundwire");
    const body = el("div", "answer md");
    body.id = "answer";
    body.dataset.state = "streaming";
    body.setAttribute("aria-busy", "true");
    const chips = el("div", "chips");
    chips.id = "citations";
    chips.setAttribute("role", "group");  // aria-label needs a role that takes a name
    chips.setAttribute("aria-label", "Citations");
    reply.append(meta, body, chips);
    turn.append(user, reply);
    transcript.append(turn);
    turn.scrollIntoView({ block: "nearest" });
    return { turn, body, chips, meta };
  }

  function finish(view, state) {
    view.body.dataset.state = state;
    view.body.setAttribute("aria-busy", "false");
  }

  function renderSources(sources, collection) {
    sourcesEl.replaceChildren();
    for (const s of sources) {
      const li = document.createElement("li");
      li.value = s.number || s.rank;
      const title = el("a", "", sourceLabel(s));
      openInNewTab(title, sourceHref(s, collection));
      const meta = el("div", "meta",
        `[${s.number || s.rank}] ${s.source_id} · score ${Number(s.score).toFixed(3)}` +
        (s.match_reason ? ` · ${s.match_reason}` : "") +
        (s.injection_flagged ? " · flagged: looks like an instruction" : ""));
      li.append(title);
      if (s.live) {  // looked up on the documentation site, not in the collection
        const badge = el("span", "chip live", "live");
        badge.title = "Fetched live from the documentation site" +
          (s.fetched_at ? ` at ${new Date(s.fetched_at * 1000).toISOString()}` : "") +
          "; not part of the collection";
        li.append(" ", badge);
      }
      li.append(meta);
      sourcesEl.append(li);
    }
  }

  function failed(c) {
    return c.status === "unsupported" || c.status === "contradicted" || c.status === "unrelated";
  }

  // Only an entailment model or an LLM judge reads meaning; the similarity score's
  // labels (quoted, similar, unrelated) say what it saw, never that a source supports.
  const MEANING_METHODS = new Set(["nli", "llm"]);
  const CHIP_TITLES = {
    quoted: "Quoted verbatim from this source, chosen by similarity; its meaning was not checked",
    similar: "Close to this source by similarity; its meaning was not checked",
    unrelated: "By similarity, this source shares little with the sentence citing it",
    unsupported: "This citation was not supported by its source",
    contradicted: "This source contradicts the sentence citing it",
  };

  function renderCitations(view, event, collection) {
    const citations = event.citations || [];
    const bad = new Set(citations.filter(failed).map((c) => c.number));
    const spans = new Map();
    for (const c of citations) {
      if (c.source_span && !failed(c) && !spans.has(c.number)) spans.set(c.number, c.source_span);
    }
    const statusOf = new Map();
    for (const c of citations) if (!statusOf.has(c.number) || failed(c)) statusOf.set(c.number, c.status);
    view.chips.replaceChildren();
    for (const s of event.sources) {
      const href = sourceHref(s, collection, spans.get(s.number));
      const chip = el("a", "chip" + (bad.has(s.number) ? " unsupported" : ""),
        `[${s.number}] ${s.title || s.source_id}`);
      chip.dataset.number = String(s.number);
      openInNewTab(chip, href);
      chip.title = safeUrl(s.url) ? href : `Open the stored text of ${s.source_id}`;
      const label = CHIP_TITLES[statusOf.get(s.number)];
      if (label) chip.title = label;
      view.chips.append(chip);
    }
    if (citations.length && !citations.some((c) => MEANING_METHODS.has(c.method))) {
      view.chips.append(el("p", "hint similarity-only",
        citations.every((c) => c.status === "quoted")
          ? "Quoted passages chosen by similarity to the question; nothing checked their meaning."
          : "Citations scored by similarity only (relevance, not proof); nothing checked their meaning."));
    }
    const withheld = event.withheld || [];
    if (withheld.length) {
      const note = el("details", "withheld");
      note.append(el("summary", "",
        `${withheld.length} sentence(s) withheld by the citation check`));
      const list = el("ul");
      for (const w of withheld) list.append(el("li", "", `${w.sentence} — ${w.reason}`));
      note.append(list);
      view.chips.append(note);
    }
  }

  function stageDetails(st) {
    const entries = Object.entries(st.details || {});
    if (!entries.length) return el("span", "hint", "—");
    const dl = el("dl", "details");
    for (const [key, value] of entries) {
      dl.append(el("dt", "", key.replace(/_/g, " ")), el("dd", "", value));
    }
    return dl;
  }

  function renderStages(stages) {
    stagesBody.replaceChildren();
    for (const st of stages) {
      const tr = document.createElement("tr");
      tr.dataset.stage = st.name;
      if (st.fallback) tr.className = "fallback";
      const ms = el("td", "ms", `${Number(st.ms).toFixed(1)} ms`);
      const fb = el("td", "fb", st.fallback
        ? `yes: ${st.reason || "fallback"}${st.dependency ? ` (${st.dependency})` : ""}`
        : "no");
      const details = el("td", "");
      details.append(stageDetails(st));
      tr.append(el("td", "", st.name), ms, fb, details);
      stagesBody.append(tr);
    }
  }

  // ------------------------------------------------------------ chat

  // Server-sent events over fetch: blocks separated by a blank line; "event:" names
  // the block, "data:" lines carry its JSON; lines starting with ":" are comments.
  async function* readEvents(body) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let name = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "event") name = val;
          else if (field === "data") data.push(val);
        }
        if (data.length) yield { name, data: JSON.parse(data.join("\n")) };
      }
    }
  }

  async function ask(text) {
    const collection = picker.value;
    const messages = history.concat([{ role: "user", content: text }]).slice(-MAX_MESSAGES);
    const body = { messages };
    if (collection) body.collection = collection;
    if (conversationId) body.conversation_id = conversationId;
    const view = addTurn("ask", text, collection);
    sourcesEl.replaceChildren();
    stagesBody.replaceChildren();
    setBusy(true);
    setStatus("Searching…");
    controller = new AbortController();
    let answer = "";
    let finished = false;
    try {
      const response = await fetch("/v1/chat", {
        method: "POST",
        headers: authHeaders({ "Content-Type": "application/json", Accept: "text/event-stream" }),
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!response.ok) {
        setStatus(await errorOf(response), true);
        finish(view, "error");
        return;
      }
      for await (const ev of readEvents(response.body)) {
        const d = ev.data;
        if (ev.name === "retrieval") {
          renderSources(d.sources, collection);
          setStatus(`Found ${d.sources.length} sources; answering…`);
        } else if (ev.name === "delta") {
          // extractive answers arrive as one delta: rendered the same way
          answer += d.text;
          renderMarkdown(view.body, answer);
        } else if (ev.name === "reset") {
          answer = "";
          view.body.replaceChildren();
          setStatus(`Searching again: ${d.reason}`);
        } else if (ev.name === "citations") {
          renderCitations(view, d, collection);
        } else if (ev.name === "stages") {
          renderStages(d.stages);
        } else if (ev.name === "done") {
          finished = true;
          answer = d.answer;
          renderMarkdown(view.body, answer);
          view.body.dataset.mode = d.mode;
          if (d.mode !== "generated") view.meta.textContent += ` · ${d.mode}`;
          setStatus(d.mode === "declined" ? "The documents do not answer this." : "Done.");
          finish(view, "done");
          if (d.conversation_id) conversationId = d.conversation_id;
          if (d.answer_id) addFeedback(view, d.answer_id, null);
        } else if (ev.name === "error") {
          finished = true;
          setStatus(`${d.message} (${d.code})`, true);
          finish(view, "error");
        }
      }
      if (!finished) {
        setStatus("The answer stopped before it was complete.", true);
        finish(view, "error");
      } else if (view.body.dataset.state === "done") {
        const said = (answer || "(no answer)").slice(0, MAX_PART_CHARS);
        history = messages.concat([{ role: "assistant", content: said }]);
        loadConversations();
      }
    } catch (e) {
      if (e.name === "AbortError") {
        setStatus("Stopped.");
        finish(view, "stopped");
      } else {
        setStatus(`Could not reach the server: ${e.message}`, true);
        finish(view, "error");
      }
    } finally {
      controller = null;
      setBusy(false);
    }
  }

  // ------------------------------------------------------------ feedback

  // Under a stored answer: "Right" / "Wrong" (sent at once), then an optional comment
  // sent with the same rating (rating again replaces the earlier one).
  // A thumb drawn in SVG (the outline of Feather's thumbs-up icon, MIT): no icon font,
  // no emoji font needed; "down" is the same thumb turned over.
  const SVG = "http://www.w3.org/2000/svg";
  const THUMB = "M14 9V5a3 3 0 0 0-3-3l-4 9v11h11.28a2 2 0 0 0 2-1.7l1.38-9a2 2 0 0 0-2-2.3z" +
    "M7 22H4a2 2 0 0 1-2-2v-7a2 2 0 0 1 2-2h3";

  function thumb(value) {
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("class", `thumb thumb-${value}`);
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", THUMB);
    svg.append(path);
    return svg;
  }

  function addFeedback(view, answerId, rating) {
    const box = el("div", "feedback");
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "Rate this answer");
    box.append(el("span", "hint", "Was this answer right?"));
    const buttons = {};
    const note = el("span", "hint feedback-status");
    note.setAttribute("role", "status");
    const comment = el("form", "feedback-comment");
    comment.hidden = true;
    const field = el("input");
    field.type = "text";
    field.maxLength = 2000;
    field.placeholder = "What was wrong or missing? (optional)";
    field.setAttribute("aria-label", "Comment on this answer");
    const send = el("button", "", "Send comment");
    send.type = "submit";
    comment.append(field, send);
    let current = rating;

    function show(value) {
      for (const [name, button] of Object.entries(buttons)) {
        button.setAttribute("aria-pressed", String(name === value));
      }
    }

    async function rate(value, text) {
      note.textContent = "Sending…";
      try {
        const response = await fetch("/v1/feedback", {
          method: "POST",
          headers: authHeaders({ "Content-Type": "application/json" }),
          body: JSON.stringify({ answer_id: answerId, rating: value, comment: text || "" }),
        });
        if (!response.ok) {
          note.textContent = `Not recorded: ${await errorOf(response)}`;
          return;
        }
        current = value;
        show(value);
        note.textContent = text ? "Comment recorded. Thank you." : "Recorded. Thank you.";
        comment.hidden = Boolean(text);
        if (!text) field.focus();
      } catch (e) {
        note.textContent = `Not recorded: ${e.message}`;
      }
    }

    for (const [value, label] of [["up", "Right"], ["down", "Wrong"]]) {
      const button = el("button", `rate rate-${value}`);
      button.type = "button";
      button.append(thumb(value), ` ${label}`);
      button.addEventListener("click", () => rate(value, ""));
      buttons[value] = button;
      box.append(button);
    }
    show(current);
    comment.addEventListener("submit", (e) => {
      e.preventDefault();
      if (current) rate(current, field.value.trim());
    });
    box.append(note, comment);
    view.turn.querySelector(".msg.assistant").append(box);
  }

  // ------------------------------------------------------------ past conversations

  const pastList = $("conversations");

  async function loadConversations() {
    if (!pastList) return;
    try {
      const response = await fetch("/v1/conversations?limit=20", { headers: authHeaders() });
      if (!response.ok) return;
      const found = (await response.json()).conversations;
      const items = found.map((c) => {
        const li = el("li");
        const open = el("button", "past", c.title || "(untitled)");
        open.type = "button";
        open.dataset.id = c.id;
        if (c.id === conversationId) open.setAttribute("aria-current", "true");
        open.addEventListener("click", () => openConversation(c.id));
        const when = new Date(c.updated_at * 1000).toLocaleString();
        li.append(open, el("div", "meta", `${c.collection} · ${c.turns} answer(s) · ${when}`));
        return li;
      });
      pastList.replaceChildren(...items);
      $("past-empty").hidden = items.length > 0;
    } catch (e) {
      // the list stays as it was: asking still works
    }
  }

  // Shows a stored conversation as it was answered and continues it on the next question.
  async function openConversation(id) {
    if (busy) return;
    try {
      const response = await fetch(`/v1/conversations/${encodeURIComponent(id)}`,
        { headers: authHeaders() });
      if (!response.ok) {
        setStatus(await errorOf(response), true);
        return;
      }
      const c = await response.json();
      transcript.replaceChildren();
      history = [];
      let last = null;
      for (const a of c.answers) {
        const view = addTurn("ask", a.question, c.collection);
        renderMarkdown(view.body, a.answer);
        view.body.dataset.mode = a.mode;
        if (a.mode !== "generated") view.meta.textContent += ` · ${a.mode}`;
        renderCitations(view, a, c.collection);
        finish(view, "done");
        addFeedback(view, a.id, a.rating);
        history.push({ role: "user", content: a.question },
          { role: "assistant", content: (a.answer || "(no answer)").slice(0, MAX_PART_CHARS) });
        last = a;
      }
      history = history.slice(-(MAX_MESSAGES - 1));
      conversationId = c.id;
      if ([...picker.options].some((o) => o.value === c.collection)) picker.value = c.collection;
      if (last) {
        renderSources(last.sources, c.collection);
        renderStages(last.stages);
      }
      setStatus(`Reopened: ${c.answers.length} answer(s). A question continues this conversation.`);
      loadConversations();
      question.focus();
    } catch (e) {
      setStatus(`Could not reach the server: ${e.message}`, true);
    }
  }

  // ------------------------------------------------------------ search

  async function search(text) {
    const collection = picker.value;
    const body = { query: text, limit: SEARCH_LIMIT };
    if (collection) body.collection = collection;
    const view = addTurn("search", text, collection);
    setBusy(true);
    setStatus("Searching…");
    controller = new AbortController();
    try {
      const response = await fetch("/v1/search", {
        method: "POST",
        headers: authHeaders({ "Content-Type": "application/json" }),
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!response.ok) {
        setStatus(await errorOf(response), true);
        finish(view, "error");
        return;
      }
      const result = await response.json();
      const list = el("ol", "results");
      for (const r of result.results) {
        const li = el("li");
        const link = el("a", "", sourceLabel(r));
        openInNewTab(link, sourceHref(r, collection));
        const meta = el("div", "meta", `${r.source_id} · score ${Number(r.score).toFixed(3)}` +
          (r.match_reason ? ` · ${r.match_reason}` : ""));
        // a result's text is Markdown: rendered and sanitised like an answer
        const snippet = el("div", "snippet markdown");
        renderMarkdown(snippet, r.text.length > 600 ? `${r.text.slice(0, 600)}…` : r.text);
        snippet.style.whiteSpace = "normal";  // .snippet pre-wraps plain text; this is HTML
        li.append(link, meta, snippet);
        list.append(li);
      }
      view.body.replaceChildren(result.results.length ? list : el("p", "hint", "No results."));
      renderSources(result.results, result.collection);
      renderStages(result.stages);
      setStatus(`${result.results.length} results.`);
      finish(view, "done");
    } catch (e) {
      setStatus(e.name === "AbortError" ? "Stopped." : `Could not reach the server: ${e.message}`,
        e.name !== "AbortError");
      finish(view, e.name === "AbortError" ? "stopped" : "error");
    } finally {
      controller = null;
      setBusy(false);
    }
  }

  // ------------------------------------------------------------ collections

  // The picker lists the collections the caller may use: GET /v1/models names
  // "groundwire:<collection>" for each (the listing every caller may read).
  async function loadCollections(select) {
    try {
      const response = await fetch("/v1/models", { headers: authHeaders() });
      if (!response.ok) return;
      const body = await response.json();
      const names = body.data.map((m) => m.id)
        .filter((id) => id.startsWith(MODEL_PREFIX))
        .map((id) => id.slice(MODEL_PREFIX.length));
      const keep = select || picker.value;
      const options = [new Option("Server default", "")];
      for (const name of names) options.push(new Option(name, name));
      picker.replaceChildren(...options);
      picker.value = names.includes(keep) ? keep : "";
    } catch (e) {
      // the picker keeps the server default: asking still works
    }
  }

  // ------------------------------------------------------------ wiring

  function newConversation() {
    if (controller) controller.abort();
    history = [];
    conversationId = null;
    loadConversations();
    transcript.replaceChildren(el("p", "hint", "New conversation."));
    transcript.firstChild.id = "empty";
    sourcesEl.replaceChildren();
    stagesBody.replaceChildren();
    setStatus("");
    question.focus();
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = question.value.trim();
    if (!text || busy) return;
    question.value = "";
    if (mode() === "search") search(text);
    else ask(text);
  });
  question.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });
  for (const radio of document.querySelectorAll("input[name='mode']")) {
    radio.addEventListener("change", () => {
      sendBtn.textContent = mode() === "search" ? "Search" : "Ask";
    });
  }
  // a conversation is about one collection: after a switch the earlier turns stay
  // on screen but are no longer sent with the next question
  picker.addEventListener("change", () => {
    if (!history.length) return;
    history = [];
    conversationId = null;
    const name = picker.value || "the server default";
    transcript.append(el("p", "divider", `Collection changed to ${name}: a new conversation.`));
  });
  stopBtn.addEventListener("click", () => controller && controller.abort());
  $("reset").addEventListener("click", newConversation);
  // shared with upload.js (the admin upload panel)
  window.groundwire = { $, el, authHeaders, safeUrl, errorOf, readEvents, loadCollections, picker };
  loadCollections();
  loadConversations();
  $("apikey").addEventListener("change", loadConversations);
})();
