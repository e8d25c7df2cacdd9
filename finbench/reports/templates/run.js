(function(){
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
