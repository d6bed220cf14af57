// Groundwire's web page: POST /v1/chat, read the server-sent events from the
// response body stream, render the answer as it arrives. No framework, no build step.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const form = $("ask");
  const question = $("question");
  const answerEl = $("answer");
  const statusEl = $("status");
  const modeEl = $("mode");
  const chipsEl = $("citations");
  const sourcesEl = $("sources");
  const stagesBody = $("stages").querySelector("tbody");
  const sendBtn = $("send");
  const stopBtn = $("stop");

  const MAX_MESSAGES = 20;
  const MAX_PART_CHARS = 4000;
  let history = [];
  let controller = null;
  let askedCollection = "";  // the collection of the answer on screen ("" = server default)

  function setStatus(text, isError) {
    statusEl.textContent = text;
    statusEl.classList.toggle("error", Boolean(isError));
  }

  function setState(state) {
    answerEl.dataset.state = state;
    answerEl.setAttribute("aria-busy", state === "streaming" ? "true" : "false");
    sendBtn.disabled = state === "streaming";
    stopBtn.disabled = state !== "streaming";
  }

  function clearOutput() {
    answerEl.textContent = "";
    modeEl.textContent = "";
    chipsEl.replaceChildren();
    sourcesEl.replaceChildren();
    stagesBody.replaceChildren();
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
  // stored document with the cited chunk marked and scrolled to (#cited).
  function sourceHref(s) {
    const url = safeUrl(s.url);
    if (url) return url;
    const params = new URLSearchParams({ source_id: s.source_id });
    if (askedCollection) params.set("collection", askedCollection);
    if (s.chunk_id) params.set("chunk", s.chunk_id);
    return `/v1/sources/view?${params}#cited`;
  }

  function openInNewTab(link, href) {
    link.href = href;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
  }

  function sourceLabel(s) {
    const path = (s.heading_path || []).join(" › ");
    return path || s.title || s.source_id;
  }

  function renderSources(sources) {
    sourcesEl.replaceChildren();
    for (const s of sources) {
      const li = document.createElement("li");
      li.value = s.number;
      const title = document.createElement("a");
      title.textContent = sourceLabel(s);
      openInNewTab(title, sourceHref(s));
      const meta = document.createElement("div");
      meta.className = "meta";
      meta.textContent = `[${s.number}] ${s.source_id} · score ${Number(s.score).toFixed(3)}` +
        (s.match_reason ? ` · ${s.match_reason}` : "") +
        (s.injection_flagged ? " · flagged: looks like an instruction" : "");
      li.append(title, meta);
      sourcesEl.append(li);
    }
  }

  function renderCitations(sources, citations) {
    const unsupported = new Set(
      (citations || []).filter((c) => c.status === "unsupported").map((c) => c.number));
    chipsEl.replaceChildren();
    for (const s of sources) {
      const href = sourceHref(s);
      const chip = document.createElement("a");
      chip.className = "chip" + (unsupported.has(s.number) ? " unsupported" : "");
      chip.textContent = `[${s.number}] ${s.title || s.source_id}`;
      chip.dataset.number = String(s.number);
      openInNewTab(chip, href);
      chip.title = safeUrl(s.url) ? href : `Open the stored text of ${s.source_id}`;
      if (unsupported.has(s.number)) chip.title = "This citation was not supported by its source";
      chipsEl.append(chip);
    }
  }

  function renderStages(stages) {
    stagesBody.replaceChildren();
    for (const st of stages) {
      const tr = document.createElement("tr");
      tr.dataset.stage = st.name;
      if (st.fallback) tr.className = "fallback";
      const name = document.createElement("td");
      name.textContent = st.name;
      const ms = document.createElement("td");
      ms.className = "ms";
      ms.textContent = `${Number(st.ms).toFixed(1)} ms`;
      const fb = document.createElement("td");
      fb.textContent = st.fallback
        ? `yes: ${st.reason || "fallback"}${st.dependency ? ` (${st.dependency})` : ""}`
        : "no";
      tr.append(name, ms, fb);
      stagesBody.append(tr);
    }
  }

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

  async function ask(text) {
    const messages = history.concat([{ role: "user", content: text }]).slice(-MAX_MESSAGES);
    const body = { messages };
    const collection = $("collection").value.trim();
    if (collection) body.collection = collection;
    askedCollection = collection;
    const headers = { "Content-Type": "application/json", Accept: "text/event-stream" };
    const key = $("apikey").value.trim();
    if (key) headers.Authorization = `Bearer ${key}`;

    clearOutput();
    setState("streaming");
    setStatus("Searching…");
    controller = new AbortController();
    let answer = "";
    let finished = false;
    try {
      const response = await fetch("/v1/chat", {
        method: "POST", headers, body: JSON.stringify(body), signal: controller.signal,
      });
      if (!response.ok) {
        setStatus(await errorOf(response), true);
        setState("error");
        return;
      }
      for await (const ev of readEvents(response.body)) {
        const d = ev.data;
        if (ev.name === "retrieval") {
          renderSources(d.sources);
          setStatus(`Found ${d.sources.length} sources; answering…`);
        } else if (ev.name === "delta") {
          answer += d.text;
          answerEl.textContent = answer;
        } else if (ev.name === "reset") {
          answer = "";
          answerEl.textContent = "";
          setStatus(`Searching again: ${d.reason}`);
        } else if (ev.name === "citations") {
          renderCitations(d.sources, d.citations);
        } else if (ev.name === "stages") {
          renderStages(d.stages);
        } else if (ev.name === "done") {
          finished = true;
          answer = d.answer;
          answerEl.textContent = answer;
          modeEl.textContent = d.mode === "generated" ? "" : `(${d.mode})`;
          setStatus(d.mode === "declined" ? "The documents do not answer this." : "Done.");
          setState("done");
        } else if (ev.name === "error") {
          finished = true;
          setStatus(`${d.message} (${d.code})`, true);
          setState("error");
        }
      }
      if (!finished) {
        setStatus("The answer stopped before it was complete.", true);
        setState("error");
      } else if (answerEl.dataset.state === "done") {
        const said = (answer || "(no answer)").slice(0, MAX_PART_CHARS);
        history = messages.concat([{ role: "assistant", content: said }]);
      }
    } catch (e) {
      if (e.name === "AbortError") {
        setStatus("Stopped.");
        setState("stopped");
      } else {
        setStatus(`Could not reach the server: ${e.message}`, true);
        setState("error");
      }
    } finally {
      controller = null;
    }
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = question.value.trim();
    if (!text || answerEl.dataset.state === "streaming") return;
    ask(text);
  });
  question.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });
  stopBtn.addEventListener("click", () => controller && controller.abort());
  $("reset").addEventListener("click", () => {
    if (controller) controller.abort();
    history = [];
    clearOutput();
    setStatus("");
    setState("idle");
    question.focus();
  });
})();
