// The web page's upload panel: shown when the API key field holds a key the admin API
// accepts; uploads files into a collection (POST /v1/admin/collections/{name}/files) and
// follows the queued ingest job to its report. Uses the helpers app.js shares.
"use strict";

(function () {
  const { $, el, authHeaders, safeUrl, errorOf, readEvents, loadCollections, picker } =
    window.groundwire;

  // The upload panel shows only for a key the admin API accepts.
  async function checkKey() {
    const key = $("apikey").value.trim();
    const panel = $("upload");
    if (!key) {
      panel.hidden = true;
      $("keyinfo").textContent = "";
      return;
    }
    try {
      const response = await fetch("/v1/admin/collections", { headers: authHeaders() });
      panel.hidden = !response.ok;
      $("keyinfo").textContent = response.ok ? "Admin key: uploads enabled." : "";
      if (response.ok && !$("upload-collection").value) {
        $("upload-collection").value = picker.value;
      }
    } catch (e) {
      panel.hidden = true;
    }
    loadCollections();
  }

  // An ingest answered 202 is a queued job: follow its events until it ends.
  // Returns the finished job, or null (the status line says why).
  async function followJob(accepted, statusLine) {
    const url = safeUrl(accepted.url);
    if (!url) return null;
    statusLine.textContent = "Queued…";
    const response = await fetch(`${url}/events`, {
      headers: authHeaders({ Accept: "text/event-stream" }),
    });
    if (!response.ok) {
      statusLine.textContent = await errorOf(response);
      statusLine.classList.add("error");
      return null;
    }
    for await (const ev of readEvents(response.body)) {
      const job = ev.data;
      if (ev.name === "progress") {
        statusLine.textContent = `Ingesting: ${job.counts.done} of ${job.counts.total} ` +
          `document(s) (${job.state})…`;
      } else if (ev.name === "done") {
        if (job.state !== "succeeded") {
          statusLine.textContent = `The ingest ${job.state}: ${job.error || "no reason given"}`;
          statusLine.classList.add("error");
        }
        return job;
      } else if (ev.name === "error") {
        statusLine.textContent = `${job.message} (${job.code})`;
        statusLine.classList.add("error");
        return null;
      }
    }
    statusLine.textContent = "The ingest's progress stopped before it ended.";
    statusLine.classList.add("error");
    return null;
  }

  // A report (200, wait=true) or a finished job (202 followed): the same summary.
  function showReport(r, statusLine, report) {
    const c = r.counts || r;
    if (!statusLine.classList.contains("error")) {
      statusLine.textContent = `Into ${r.collection}: ${c.ingested} new, ${c.updated} updated, ` +
        `${c.unchanged} unchanged, ${c.skipped} skipped` +
        (c.failed ? `, ${c.failed} failed` : "") + ` (${c.chunks_written} chunks).`;
    }
    for (const d of r.documents || []) {
      const why = d.reason || d.error;
      report.append(el("li", "", `${d.source_id}: ${d.status || d.outcome}` +
        (d.chunks ? `, ${d.chunks} chunks` : "") + (why ? ` (${why})` : "")));
    }
  }

  async function upload() {
    const name = $("upload-collection").value.trim();
    const files = $("upload-files").files;
    const statusLine = $("upload-status");
    const report = $("upload-report");
    if (!name || !files.length) return;
    const data = new FormData();
    for (const f of files) data.append("files", f, f.webkitRelativePath || f.name);
    data.append("create_collection", $("upload-create").checked ? "true" : "false");
    $("upload-send").disabled = true;
    statusLine.classList.remove("error");
    statusLine.textContent = `Uploading ${files.length} file(s)…`;
    report.replaceChildren();
    try {
      const response = await fetch(`/v1/admin/collections/${encodeURIComponent(name)}/files`, {
        method: "POST", headers: authHeaders(), body: data,
      });
      if (!response.ok) {
        statusLine.textContent = await errorOf(response);
        statusLine.classList.add("error");
        return;
      }
      let r = await response.json();
      if (response.status === 202) r = await followJob(r, statusLine);
      if (!r) return;
      showReport(r, statusLine, report);
      await loadCollections(picker.value);
    } catch (e) {
      statusLine.textContent = `Could not reach the server: ${e.message}`;
      statusLine.classList.add("error");
    } finally {
      $("upload-send").disabled = false;
    }
  }

  $("apikey").addEventListener("change", checkKey);
  $("upload-form").addEventListener("submit", (e) => {
    e.preventDefault();
    upload();
  });
})();
