(function(){
// tables: a click on a header sorts by its column (numbers by value, text as text; cells
// without a value last), a second click the other way
function sortBy(table, col, th) {
  const body = table.tBodies[0];
  const down = th.getAttribute('aria-sort') === 'ascending';
  for (const h of table.tHead.rows[0].cells) h.setAttribute('aria-sort', 'none');
  th.setAttribute('aria-sort', down ? 'descending' : 'ascending');
  const numeric = th.classList.contains('num');
  const key = tr => {
    const td = tr.cells[col];
    if (!numeric) return td.textContent;
    const v = td.dataset.sort;
    return v === undefined ? null : parseFloat(v);
  };
  const rows = Array.from(body.rows).map((tr, i) => [key(tr), i, tr]);
  rows.sort((a, b) => {
    if (a[0] === null || b[0] === null) return (a[0] === null) - (b[0] === null) || a[1] - b[1];
    const c = numeric ? a[0] - b[0] : a[0].localeCompare(b[0]);
    return (down ? -c : c) || a[1] - b[1];
  });
  body.append(...rows.map(r => r[2]));
}
for (const table of document.querySelectorAll('table.sortable')) {
  Array.from(table.tHead.rows[0].cells).forEach((th, col) =>
    th.querySelector('button').addEventListener('click', () => sortBy(table, col, th)));
}

// the samples: filters, a page of rows at a time, a row's exchange on a click
const rows = JSON.parse(document.getElementById('sample-data').textContent);
const spec = JSON.parse(document.getElementById('sample-spec').textContent);
const form = document.getElementById('filters');
const PAGE = spec.page;
let shown = rows, page = 0;
for (const key of spec.filters) {
  const select = form.elements[key];
  const values = Array.from(new Set(rows.map(r => r[key]))).sort();
  select.add(new Option('all', ''));
  for (const v of values) select.add(new Option(v, v));
  select.addEventListener('change', () => { page = 0; filter(); });
}
function detail(r) {
  const lines = r.head.slice();
  if (r.rationale) lines.push('rationale: ' + r.rationale);
  if (r.raw) lines.push('raw answer: ' + r.raw);
  for (const m of r.messages || []) {  // an agent's: each turn's calls, each answer
    lines.push('', m.role === 'tool' ? '[tool answer to ' + m.tool_call_id + ']'
                                     : '[' + m.role + ']');
    if (m.content) lines.push(m.content);
    for (const c of m.tool_calls || [])
      lines.push('-> ' + c.id + ': ' + (c.function || {}).name + ' ' +
                 (c.function || {}).arguments);
  }
  document.getElementById('detail').textContent = lines.join('\n');
}
function filter() {
  const want = Object.fromEntries(spec.filters.map(k => [k, form.elements[k].value]));
  shown = rows.filter(r => spec.filters.every(k => !want[k] || r[k] === want[k]));
  draw();
}
function draw() {
  const pages = Math.max(1, Math.ceil(shown.length / PAGE));
  page = Math.min(Math.max(page, 0), pages - 1);
  const body = document.querySelector('#sample-list tbody');
  body.replaceChildren();
  for (const r of shown.slice(page * PAGE, (page + 1) * PAGE)) {
    const tr = body.insertRow();
    tr.dataset.task = r.task; tr.dataset.model = r.model;
    r.cells.forEach((v, i) => {
      const td = tr.insertCell();
      td.textContent = v;
      if (spec.numeric.includes(i)) td.className = 'num';
    });
    tr.addEventListener('click', () => detail(r));
  }
  document.getElementById('count').textContent = `${shown.length} of ${rows.length} samples`;
  document.getElementById('page').textContent = `page ${page + 1} of ${pages}`;
  document.getElementById('prev').disabled = page === 0;
  document.getElementById('next').disabled = page >= pages - 1;
}
document.getElementById('prev').addEventListener('click', () => { page -= 1; draw(); });
document.getElementById('next').addEventListener('click', () => { page += 1; draw(); });
filter();
})();
