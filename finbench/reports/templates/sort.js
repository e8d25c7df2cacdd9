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
})();
