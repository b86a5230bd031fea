"use strict";
// tscore's report page: decodes the inline rows, draws the table a page at a time, sorts,
// filters to failing rows, shows a row's details and histogram, and links the chart to the rows.
// Every text from the report goes in with textContent: a name such as <script> stays text.
(function () {
  const $ = (id) => document.getElementById(id);
  const state = { data: null, view: null, sortKey: null, sortDir: 1, onlyFailed: false, text: "",
    page: 0, selected: -1, timer: null };
  const SNAP_PX = 6;  // a click goes to the highest drawn point this close to it

  async function decode() {
    const text = $("payload").textContent.trim();
    const binary = atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  function asNumber(value) {
    if (value === null || value === undefined || value === "") return null;
    if (value === "Infinity") return Infinity;
    if (value === "-Infinity") return -Infinity;
    if (value === "NaN") return NaN;
    return typeof value === "number" ? value : null;
  }

  function percent(share) {
    // two decimals, more where rounding would show 100.00% although some element failed
    const value = share * 100;
    let digits = 2;
    while (digits < 8 && share < 1 && Number(value.toFixed(digits)) >= 100) digits++;
    return `${value.toFixed(digits)}%`;
  }

  // A name may break only after "_", "." or "/" (a <wbr> there, which copies as nothing); a word
  // such as a status never breaks (the stylesheet keeps every other character together).
  function fillName(td, text) {
    const pieces = text.split(/([_./])/), nodes = [];  // no look-behind: older Safari cannot parse one
    for (let k = 0; k < pieces.length; k += 2) {
      nodes.push(pieces[k] + (pieces[k + 1] || ""));
      if (k + 2 < pieces.length) nodes.push(document.createElement("wbr"));
    }
    td.replaceChildren(...nodes);
  }

  function show(value, numeric, asPercent) {
    if (value === null || value === undefined) return "-";
    if (!numeric) return String(value);
    const number = asNumber(value);
    if (number === null) return String(value);
    if (!Number.isFinite(number)) return String(value);
    if (asPercent) return percent(number);
    if (number === 0) return "0";
    const size = Math.abs(number);
    return size >= 1e-4 && size < 1e6 ? String(Number(number.toPrecision(6))) : number.toExponential(3);
  }

  function rebuild() {
    const d = state.data, total = d.failed.length, text = state.text.toLowerCase();
    const textKeys = d.columns.filter((c) => !c.numeric).map((c) => d.cells[c.key]);
    const keep = [];
    for (let i = 0; i < total; i++) {
      if (state.onlyFailed && !d.failed[i]) continue;
      if (text && !textKeys.some((col) => col[i] !== null && String(col[i]).toLowerCase().includes(text))) continue;
      keep.push(i);
    }
    if (state.sortKey !== null) {
      const column = d.columns.find((c) => c.key === state.sortKey);
      const cells = d.cells[column.key], dir = state.sortDir;
      if (column.numeric) {
        const key = (i) => { const n = asNumber(cells[i]); return n === null ? null : (Number.isNaN(n) ? Infinity : n); };
        keep.sort((a, b) => {
          const x = key(a), y = key(b);
          if (x === null || y === null) return x === y ? a - b : (x === null ? 1 : -1);  // no value: last
          return x === y ? a - b : (x < y ? -dir : dir);
        });
      } else {
        keep.sort((a, b) => {
          const x = cells[a] === null ? "" : String(cells[a]), y = cells[b] === null ? "" : String(cells[b]);
          return x === y ? a - b : (x < y ? -dir : dir);
        });
      }
    }
    state.view = keep;
    document.body.dataset.shown = String(keep.length);
  }

  function draw() {
    const d = state.data, view = state.view, size = d.pageRows;
    const pages = Math.max(1, Math.ceil(view.length / size));
    state.page = Math.min(Math.max(state.page, 0), pages - 1);
    const start = state.page * size, end = Math.min(view.length, start + size);
    const body = $("body");
    const rows = document.createDocumentFragment();
    for (let v = start; v < end; v++) {
      const i = view[v], tr = document.createElement("tr");
      tr.dataset.row = String(i);
      if (d.failed[i]) tr.classList.add("failed");
      if (i === d.first) tr.classList.add("first");
      if (i === state.selected) tr.classList.add("selected");
      const number = document.createElement("td");
      number.className = "num";
      number.textContent = i === d.first ? i + " \u25B6 first divergence" : String(i);
      tr.appendChild(number);
      for (const column of d.columns) {
        const td = document.createElement("td");
        const text = show(d.cells[column.key][i], column.numeric, column.percent);
        if (column.numeric) { td.className = "num"; td.textContent = text; } else fillName(td, text);
        tr.appendChild(td);
      }
      rows.appendChild(tr);
    }
    body.replaceChildren(rows);
    $("count").textContent = view.length === d.failed.length
      ? `${view.length} rows` : `${view.length} of ${d.failed.length} rows`;
    $("pageno").textContent = view.length ? `rows ${start + 1}\u2013${end}, page ${state.page + 1} of ${pages}` : "no row";
    $("prev").disabled = state.page === 0;
    $("next").disabled = state.page >= pages - 1;
  }

  function header() {
    const d = state.data, head = $("head");
    const cells = [{ key: null, title: "row" }, ...d.columns];
    head.replaceChildren(...cells.map((column) => {
      const th = document.createElement("th");
      th.textContent = column.title;
      th.dataset.key = column.key === null ? "" : column.key;
      if (column.key !== null && column.key === state.sortKey) th.classList.add(state.sortDir > 0 ? "asc" : "desc");
      if (column.key === null && state.sortKey === null) th.classList.add("asc");
      th.addEventListener("click", () => {
        if (column.key === state.sortKey) state.sortDir = -state.sortDir;
        else { state.sortKey = column.key; state.sortDir = column.numeric ? -1 : 1; }
        refresh(true);
      });
      return th;
    }));
  }

  function refresh(toStart) {
    rebuild();
    if (toStart) state.page = 0;
    header();
    draw();
  }

  function histogram(h) {
    const ns = "http://www.w3.org/2000/svg", width = 640, height = 180, left = 50, bottom = 30;
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("width", String(width));
    svg.setAttribute("class", "histogram");
    const text = (x, y, content, anchor) => {
      const t = document.createElementNS(ns, "text");
      t.setAttribute("x", String(x)); t.setAttribute("y", String(y));
      t.setAttribute("font-size", "11"); t.setAttribute("text-anchor", anchor || "middle");
      t.textContent = content;
      svg.appendChild(t);
    };
    const top = Math.max(1, ...h.counts.map((c) => Math.log10(1 + c)));
    const plotW = width - left - 10, plotH = height - bottom - 20, barW = plotW / h.counts.length;
    h.counts.forEach((count, k) => {
      const bar = document.createElementNS(ns, "rect"), barH = plotH * Math.log10(1 + count) / top;
      bar.setAttribute("x", String(left + k * barW)); bar.setAttribute("width", String(Math.max(barW - 1, 1)));
      bar.setAttribute("y", String(20 + plotH - barH)); bar.setAttribute("height", String(barH));
      bar.setAttribute("fill", "#1f77b4");
      const tip = document.createElementNS(ns, "title");
      tip.textContent = `${show(h.edges[k], true)} to ${show(h.edges[k + 1], true)}: ${count}`;
      bar.appendChild(tip);
      svg.appendChild(bar);
    });
    text(left, height - 8, show(h.edges[0], true), "start");
    text(left + plotW, height - 8, show(h.edges[h.edges.length - 1], true), "end");
    text(left + plotW / 2, height - 8, "target \u2212 orig", "middle");
    text(left + plotW / 2, 12, `differences of ${h.n} elements (counts on a log scale)`, "middle");
    return svg;
  }

  function select(i) {
    const d = state.data;
    state.selected = i;
    const names = d.columns.filter((c) => !c.numeric).map((c) => d.cells[c.key][i]).filter((v) => v !== null);
    $("detail").hidden = false;
    $("detail-title").textContent = `row ${i}: ${names.slice(0, 2).join(" / ")}`;
    const lines = d.columns.map((c) => `${c.title}: ${show(d.cells[c.key][i], c.numeric, c.percent)}`);
    const index = d.detailOf ? d.detailOf[i] : -1;
    if (index >= 0) lines.push("", d.details[index]);
    $("detail-text").textContent = lines.join("\n");
    const h = d.hist[String(i)];
    $("histogram").replaceChildren(...(h ? [histogram(h)] : []));
    draw();
  }

  function jump(i) {
    // show row i whatever the filters: back to execution order, no filter, its page
    clearTimeout(state.timer);  // a filter typed just before must not hide the row again
    state.onlyFailed = false; state.text = ""; state.sortKey = null; state.sortDir = 1;
    $("only-failed").checked = false; $("filter").value = "";
    rebuild(); header();
    state.page = Math.floor(state.view.indexOf(i) / state.data.pageRows);
    select(i);
    const row = document.querySelector(`#body tr[data-row="${i}"]`);
    if (row) row.scrollIntoView({ block: "center" });
  }

  function chartClick(event) {
    const svg = event.currentTarget, box = svg.getBoundingClientRect();
    const view = svg.viewBox.baseVal, scale = view.width / box.width;
    const x = (event.clientX - box.left) * scale;
    const low = Number(svg.dataset.xLow), high = Number(svg.dataset.xHigh);
    const left = Number(svg.dataset.plotLeft), width = Number(svg.dataset.plotWidth);
    const perRow = width / Math.max(high - low, 1);  // pixels per row
    let row = Math.round(low + (x - left) / width * (high - low));
    // each drawn point stands for the worst of its rows: a click goes to the highest point near it
    const drawn = state.data.points[svg.closest(".chart").dataset.metric] || { rows: [], values: [] };
    const reach = SNAP_PX / perRow, rows = drawn.rows;
    let lo = 0, hi = rows.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (rows[mid] < row - reach) lo = mid + 1; else hi = mid; }
    let best = -1, bestValue = -Infinity;
    for (let k = lo; k < rows.length && rows[k] <= row + reach; k++) {
      const value = asNumber(drawn.values[k]), v = value === null || Number.isNaN(value) ? Infinity : value;
      if (v > bestValue || (v === bestValue && Math.abs(rows[k] - row) < Math.abs(rows[best] - row))) {
        best = k; bestValue = v;
      }
    }
    if (best >= 0) row = rows[best];
    const total = state.data.failed.length;
    if (total) jump(Math.min(Math.max(row, 0), total - 1));
  }

  async function start() {
    try {
      state.data = await decode();
    } catch (error) {
      $("loading").textContent = `This browser cannot read the rows (${error}); the CSV or JSON report holds them.`;
      return;
    }
    $("loading").hidden = true;
    $("only-failed").addEventListener("change", (e) => { state.onlyFailed = e.target.checked; refresh(true); });
    $("filter").addEventListener("input", (e) => {
      clearTimeout(state.timer);
      state.timer = setTimeout(() => { state.text = e.target.value; refresh(true); }, 150);
    });
    $("prev").addEventListener("click", () => { state.page--; draw(); });
    $("next").addEventListener("click", () => { state.page++; draw(); });
    $("body").addEventListener("click", (e) => {
      const tr = e.target.closest("tr");
      if (tr) select(Number(tr.dataset.row));
    });
    const metric = $("metric");
    if (metric) metric.addEventListener("change", () => {
      document.querySelectorAll(".chart").forEach((div) => { div.hidden = div.dataset.metric !== metric.value; });
    });
    document.querySelectorAll(".chart svg").forEach((svg) => svg.addEventListener("click", chartClick));
    const first = $("show-first");
    if (first) first.addEventListener("click", () => jump(state.data.first));
    refresh(true);
    document.body.dataset.readyMs = String(Math.round(performance.now()));  // since the page was asked for
    document.body.dataset.ready = "1";
  }

  start();
})();
